#!/usr/bin/env python3
"""Send random UDP datagrams at a QUIC server and count what comes back.

usage: garbage.py HOST PORT COUNT SEED TIME_LIMIT [FROM_ADDR:FROM_PORT]
Prints one JSON object: datagrams and bytes sent and received, seconds taken.
With FROM_ADDR:FROM_PORT the datagrams are sent from that (spoofed) IPv4
source through a raw socket, as an on-path attacker could; nothing is
received then.
A few fixed datagrams at the edges of the header formats come first. Of the
rest, a fifth are pure noise and the others imitate QUIC: long headers
with version 1 (Initial-sized or not), long headers with other versions
(which may draw Version Negotiation), and short headers with random
connection IDs (which may draw stateless resets). Everything stops by
TIME_LIMIT seconds.
"""
import json
import random
import select
import socket
import struct
import sys
import time

SOCKETS = 8
BURST = 100          # datagrams between pauses
PAUSE = 0.005        # seconds; keeps the receiver's socket buffer from overflowing
QUIET = 1.0          # seconds without a reply that end the drain


def varint(n):
    if n < 64:
        return bytes([n])
    if n < 16384:
        return (0x4000 | n).to_bytes(2, 'big')
    return (0x80000000 | n).to_bytes(4, 'big')


def noise(rng, size):
    return rng.randbytes(size)


def long_header(rng, size, version):
    first = 0xc0 | rng.randrange(64)
    dcil = rng.choice([0, 8, 8, 16, 20, 21, 255])
    scil = rng.choice([0, 8, 20, 33])
    head = bytes([first]) + version.to_bytes(4, 'big')
    head += bytes([dcil]) + rng.randbytes(min(dcil, 20))
    head += bytes([scil]) + rng.randbytes(min(scil, 20))
    return (head + rng.randbytes(max(0, size - len(head))))[:size]


def initial(rng, size):
    # An Initial that parses: version 1, sane lengths, a Length that covers
    # the rest; its payload does not decrypt.
    size = max(size, 1200)
    first = 0xc0 | rng.randrange(4)
    dcid = rng.randbytes(rng.choice([8, 16, 20]))
    scid = rng.randbytes(rng.choice([0, 8]))
    head = bytes([first]) + (1).to_bytes(4, 'big')
    head += bytes([len(dcid)]) + dcid + bytes([len(scid)]) + scid
    head += varint(0)  # no token
    rest = size - len(head) - 2
    head += (0x4000 | rest).to_bytes(2, 'big')
    return head + rng.randbytes(rest)


def short_header(rng, size):
    size = max(size, 22)
    first = 0x40 | rng.randrange(64)
    return bytes([first]) + rng.randbytes(size - 1)


def edge_cases():
    """Fixed datagrams at the edges of the header formats, sent first."""
    v0 = (0).to_bytes(4, 'big')
    v1 = (1).to_bytes(4, 'big')
    return [
        b'',                                             # empty datagram
        b'\x40',                                         # short header, no CID
        b'\xc0',                                         # long header, nothing else
        b'\xc0' + v1,                                    # no CID lengths
        b'\xc0' + v1 + b'\x15' + bytes(21) + b'\x00' + bytes(100),   # DCID 21 bytes
        b'\xc0' + v1 + b'\x08' + bytes(8) + b'\x15' + bytes(1200),   # SCID 21 bytes
        # Version 0 is the Version Negotiation form: CIDs of any length
        # up to 255 are legal there, and must not be taken for ours.
        b'\xc0' + v0 + b'\x15' + bytes(21) + b'\x00' + bytes(72),
        b'\x80' + v0 + b'\xff' + bytes(255) + b'\xff' + bytes(255) + bytes(8),
        b'\xc0' + v0 + b'\x14' + bytes(20) + b'\x14' + bytes(20) + v1,
        b'\xc0' + b'\x0a\x0a\x0a\x0a' + b'\xff' + bytes(255) + b'\x00' + bytes(1000),
        b'\xc0' + v1 + b'\x08' + bytes(8) + b'\x00' + b'\xff' * 1189,  # huge varints
    ]


def make(rng):
    size = rng.randint(1, 1500)
    kind = rng.random()
    if kind < 0.2:
        return noise(rng, size)
    if kind < 0.4:
        return long_header(rng, size, 1)
    if kind < 0.6:
        return initial(rng, size)
    if kind < 0.8:
        version = rng.choice([0, 0x0a0a0a0a, 0xff00001d, 2, 0x6b3343cf,
                              rng.getrandbits(32)])
        return long_header(rng, max(size, 7), version)
    return short_header(rng, size)


class Spoofer:
    """Sends UDP datagrams from a source address of our choosing."""

    MAX_PAYLOAD = 1500 - 20 - 8

    def __init__(self, src, sport, dst, dport):
        # IPPROTO_RAW implies IP_HDRINCL: the kernel fills in the header
        # checksum, the ID and the total length.
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_RAW,
                                  socket.IPPROTO_RAW)
        self.src = socket.inet_aton(src)
        self.dst = socket.inet_aton(dst)
        self.sport, self.dport, self.host = sport, dport, dst

    def send(self, payload):
        payload = payload[:self.MAX_PAYLOAD]
        udp = struct.pack('!HHHH', self.sport, self.dport, 8 + len(payload), 0)
        ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 0, 0, 0x4000, 64,
                         socket.IPPROTO_UDP, 0, self.src, self.dst)
        self.sock.sendto(ip + udp + payload, (self.host, 0))
        return len(payload)


def main():
    if len(sys.argv) not in (6, 7):
        sys.stderr.write(__doc__)
        return 2
    host, port = sys.argv[1], int(sys.argv[2])
    count, seed, limit = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    rng = random.Random(seed)
    socks = []
    spoofer = None
    if len(sys.argv) == 7:
        src, sport = sys.argv[6].rsplit(':', 1)
        spoofer = Spoofer(src, int(sport), host, port)
    else:
        for _ in range(SOCKETS):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setblocking(False)
            s.connect((host, port))
            socks.append(s)
    start = time.monotonic()
    deadline = start + limit
    st = {'sent': 0, 'sent_bytes': 0, 'received': 0, 'received_bytes': 0,
          'send_errors': 0, 'timed_out': False}

    def drain(wait):
        if not socks:
            time.sleep(wait)
            return False
        readable, _, _ = select.select(socks, [], [], wait)
        for s in readable:
            while True:
                try:
                    data = s.recv(65536)
                except (BlockingIOError, ConnectionRefusedError):
                    break
                st['received'] += 1
                st['received_bytes'] += len(data)
        return bool(readable)

    fixed = edge_cases()
    for i in range(count):
        if time.monotonic() > deadline:
            st['timed_out'] = True
            break
        pkt = fixed[i] if i < len(fixed) else make(rng)
        try:
            if spoofer is not None:
                st['sent_bytes'] += spoofer.send(pkt)
            else:
                socks[i % SOCKETS].send(pkt)
                st['sent_bytes'] += len(pkt)
            st['sent'] += 1
        except (BlockingIOError, ConnectionRefusedError, OSError):
            st['send_errors'] += 1
        if i % BURST == BURST - 1:
            drain(0)
            time.sleep(PAUSE)
    quiet_since = time.monotonic()
    while socks and time.monotonic() < deadline:
        if drain(0.1):
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= QUIET:
            break
    st['seconds'] = round(time.monotonic() - start, 3)
    print(json.dumps(st))
    return 0


if __name__ == '__main__':
    sys.exit(main())
