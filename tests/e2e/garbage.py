#!/usr/bin/env python3
"""Send random UDP datagrams at a QUIC server and count what comes back.

usage: garbage.py HOST PORT COUNT SEED TIME_LIMIT
Prints one JSON object: datagrams and bytes sent and received, seconds taken.
A fifth of the datagrams are pure noise; the rest imitate QUIC: long headers
with version 1 (Initial-sized or not), long headers with other versions
(which may draw Version Negotiation), and short headers with random
connection IDs (which may draw stateless resets). Everything stops by
TIME_LIMIT seconds.
"""
import json
import random
import select
import socket
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


def main():
    if len(sys.argv) != 6:
        sys.stderr.write(__doc__)
        return 2
    host, port = sys.argv[1], int(sys.argv[2])
    count, seed, limit = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    rng = random.Random(seed)
    socks = []
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

    for i in range(count):
        if time.monotonic() > deadline:
            st['timed_out'] = True
            break
        pkt = make(rng)
        try:
            socks[i % SOCKETS].send(pkt)
            st['sent'] += 1
            st['sent_bytes'] += len(pkt)
        except (BlockingIOError, ConnectionRefusedError, OSError):
            st['send_errors'] += 1
        if i % BURST == BURST - 1:
            drain(0)
            time.sleep(PAUSE)
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        if drain(0.1):
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= QUIET:
            break
    st['seconds'] = round(time.monotonic() - start, 3)
    print(json.dumps(st))
    return 0


if __name__ == '__main__':
    sys.exit(main())
