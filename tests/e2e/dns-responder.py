"""A DNS server for test-dns.sh, the one the tunnel's DNS points at.

usage: dns-responder.py ADDR NAME ANSWER LOG SECONDS

Listens on UDP ADDR:53. An A query for NAME gets ANSWER (an IPv4
address); any other query gets an empty NOERROR answer. Each query is
logged as "SOURCE QNAME QTYPE" to LOG. Prints "ready" once bound and
exits after SECONDS.
"""
import socket
import struct
import sys
import time


def qname(msg, off):
    labels = []
    while True:
        n = msg[off]
        off += 1
        if n == 0:
            return ".".join(labels), off
        if n & 0xc0:
            raise ValueError("compressed name in a question")
        labels.append(msg[off:off + n].decode("ascii"))
        off += n


def main():
    addr, name, answer, log, secs = sys.argv[1:6]
    name = name.lower()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 53))
    s.settimeout(0.2)
    print("ready", flush=True)
    end = time.monotonic() + float(secs)
    with open(log, "a") as out:
        while time.monotonic() < end:
            try:
                msg, peer = s.recvfrom(512)
            except socket.timeout:
                continue
            try:
                qid, flags, qd = struct.unpack("!HHH", msg[:6])
                q, off = qname(msg, 12)
                qtype, qclass = struct.unpack("!HH", msg[off:off + 4])
            except (ValueError, struct.error, UnicodeDecodeError):
                continue
            out.write("%s %s %d\n" % (peer[0], q, qtype))
            out.flush()
            question = msg[12:off + 4]
            hit = q.lower() == name and qtype == 1 and qclass == 1
            # QR, opcode 0, AA, RD copied, RA; RCODE 0.
            rflags = 0x8400 | (flags & 0x0100) | 0x0080
            reply = struct.pack("!HHHHHH", qid, rflags, 1, 1 if hit else 0, 0, 0)
            reply += question
            if hit:
                reply += struct.pack("!HHHIH", 0xc00c, 1, 1, 60, 4)
                reply += socket.inet_aton(answer)
            s.sendto(reply, peer)


if __name__ == "__main__":
    main()
