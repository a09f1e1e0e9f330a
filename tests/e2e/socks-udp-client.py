"""SOCKS5 UDP ASSOCIATE through rove's DynamicForward, with PySocks (Debian's
python3-socks) as the client: echo datagrams of varying sizes, then show
that the relay drops a foreign source's and a fragment's datagrams, that a
target outside the server's AllowForward never answers, and that closing
the control connection closes the relay port. Prints one "name value" line
per result; test-fwd-socks-udp.sh judges them.

A second association, asked for by hand over IPv6 (PySocks talks to its
proxy over IPv4 only), sends to the echo server by name: the answers must
name it the same way.

usage: socks-udp-client.py PROXY_PORT TARGET_HOST ECHO_PORT DENIED_PORT N
                           PROXY6_PORT TARGET_NAME
"""
import os
import socket
import struct
import sys
import time

import socks

proxy_port = int(sys.argv[1])
target = sys.argv[2]
echo_port = int(sys.argv[3])
denied_port = int(sys.argv[4])
count = int(sys.argv[5])
proxy6_port = int(sys.argv[6])
target_name = sys.argv[7]


def say(name, value):
    print(name, value, flush=True)


def header(host, port, frag=0):
    return struct.pack("!BBBB", 0, 0, frag, 1) + socket.inet_aton(host) + \
        struct.pack("!H", port)


def quiet(sock, secs):
    """Whether nothing arrives on sock within secs."""
    sock.settimeout(secs)
    try:
        sock.recv(65535)
        return False
    except (socket.timeout, ConnectionRefusedError):
        return True


s = socks.socksocket(socket.AF_INET, socket.SOCK_DGRAM)
s.set_proxy(socks.SOCKS5, "127.0.0.1", proxy_port)
s.settimeout(3)
# The association is asked for at the first sendto; its relay is the
# address the UDP socket is then connected to.
good = bad = lost = 0
for i in range(count):
    size = 1 + (i * 97) % 1200
    payload = os.urandom(size)
    s.sendto(payload, (target, echo_port))
    try:
        data, addr = s.recvfrom(65535)
    except socket.timeout:
        lost += 1
        continue
    if data == payload and addr == (target, echo_port):
        good += 1
    else:
        bad += 1
        if bad <= 3:
            print("mismatch", i, size, len(data), addr, file=sys.stderr)
say("echoed", good)
say("mismatched", bad)
say("lost", lost)
# PySocks answers getpeername with the target; the plain socket's own
# method gives the relay.
mine = super(socks.socksocket, s)
relay = mine.getpeername()
say("relay_port", relay[1])

# A well-formed datagram from a source other than the client: from
# another port of its address (it named its own port in the request),
# and from another address.
for src, n in (("127.0.0.1", 3), ("127.0.0.2", 1)):
    f = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    f.bind((src, 0))
    f.connect(relay)
    for _ in range(n):
        f.send(header(target, echo_port) + b"foreign")
    say("foreign_quiet_" + src, quiet(f, 1.0))
    f.close()

# Fragments, from the client itself: FRAG 1 and FRAG 0x81 (the last of a
# sequence).
mine.send(header(target, echo_port, frag=1) + b"frag one")
mine.send(header(target, echo_port, frag=0x81) + b"frag last")
say("frag_quiet", quiet(s, 1.0))

# A target the server's AllowForward does not name for UDP.
s.settimeout(2)
s.sendto(b"denied", (target, denied_port))
say("denied_quiet", quiet(s, 2.0))

# Still answering the client after all that.
s.settimeout(3)
s.sendto(b"still here", (target, echo_port))
try:
    data, addr = s.recvfrom(65535)
    say("after", data == b"still here" and addr == (target, echo_port))
except socket.timeout:
    say("after", False)

# By hand, over IPv6: DST 0 (:: port 0, "not known yet") lets any port of
# the control connection's address send.
def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        more = sock.recv(n - len(buf))
        if not more:
            raise EOFError("the proxy closed the connection")
        buf += more
    return buf


ctl = socket.create_connection(("::1", proxy6_port), timeout=3)
ctl.sendall(b"\x05\x01\x00")
assert recv_exact(ctl, 2) == b"\x05\x00"
ctl.sendall(b"\x05\x03\x00\x04" + bytes(16) + b"\x00\x00")
rep = recv_exact(ctl, 4)
say("v6_reply", rep[1])
bnd = recv_exact(ctl, 16 + 2)
relay6 = (socket.inet_ntop(socket.AF_INET6, bnd[:16]),
          struct.unpack("!H", bnd[16:])[0])
say("v6_relay", relay6[0])
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
u.connect(relay6)
u.settimeout(3)
name = target_name.encode()
hdr = b"\x00\x00\x00\x03" + bytes([len(name)]) + name + \
    struct.pack("!H", echo_port)
good6 = 0
for i in range(5):
    payload = os.urandom(100 + i * 300)
    u.send(hdr + payload)
    try:
        if u.recv(65535) == hdr + payload:
            good6 += 1
    except socket.timeout:
        pass
say("v6_echoed", good6)
u.close()
ctl.close()

# The control connection ends (PySocks closes it with the socket): the
# relay port stops answering, its datagrams meet ICMP port unreachable.
s.close()
gone = False
deadline = time.monotonic() + 5
while not gone and time.monotonic() < deadline:
    p = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    p.bind(("127.0.0.1", 0))
    p.connect(relay)
    p.settimeout(0.3)
    try:
        p.send(header(target, echo_port) + b"after close")
        p.recv(65535)
    except ConnectionRefusedError:
        gone = True
    except socket.timeout:
        pass
    p.close()
say("relay_closed", gone)
