#!/usr/bin/python3
"""Round trips of UDP echoes, for bench/udpfwd.sh.

udp-rtt.py HOST PORT COUNT INTERVAL_MS SIZE [WAIT_S [FILE]]

From one socket (so through a UDP forward, one flow): first a warm-up
datagram, sent up to 5 times 1 s apart until it comes back (it sets up a
forward's flow, which the timed echoes then do not pay for); then COUNT
datagrams of SIZE bytes, one every INTERVAL_MS ms on a fixed schedule,
not waiting for the answers, which are read as they come. Each carries
its number, so a late or reordered answer still counts for its own
datagram. An echo not back within WAIT_S seconds (default 2) of the last
send is lost. Prints JSON: sent, answered, lost, and the round trips'
min, p50, p99 and max in ms (nearest rank, of the answered ones), or
{"error": ...} if the warm-up gets no answer. With FILE, the round trips
(ms) are also appended to it, one a line in the order sent, for
percentiles over runs.
"""
import json
import math
import select
import socket
import struct
import sys
import time


def pct(sorted_ms, p):
    if not sorted_ms:
        return None
    k = max(0, math.ceil(p * len(sorted_ms)) - 1)
    return round(sorted_ms[k], 3)


def main():
    if len(sys.argv) not in (6, 7, 8):
        sys.exit(__doc__)
    host, port = sys.argv[1], int(sys.argv[2])
    count, interval = int(sys.argv[3]), float(sys.argv[4]) / 1000
    size = max(8, int(sys.argv[5]))
    wait = float(sys.argv[6]) if len(sys.argv) >= 7 else 2.0
    fam = socket.AF_INET6 if ':' in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.connect((host, port))
    pad = bytes(size - 8)
    warm = struct.pack('!q', -1) + pad
    for _ in range(5):
        s.send(warm)
        r, _, _ = select.select([s], [], [], 1.0)
        if r and s.recv(65535)[:8] == warm[:8]:
            break
    else:
        print(json.dumps({"error": "no answer to the warm-up datagram"}))
        return
    s.setblocking(False)
    sent_at = [0.0] * count
    rtt = {}

    def drain():
        while True:
            try:
                data = s.recv(65535)
            except (BlockingIOError, ConnectionRefusedError):
                return
            now = time.perf_counter()
            if len(data) < 8:
                continue
            i = struct.unpack('!q', data[:8])[0]
            if 0 <= i < count and i not in rtt and sent_at[i]:
                rtt[i] = (now - sent_at[i]) * 1000

    start = time.perf_counter()
    for i in range(count):
        due = start + i * interval
        while True:
            left = due - time.perf_counter()
            if left <= 0:
                break
            r, _, _ = select.select([s], [], [], left)
            if r:
                drain()
        sent_at[i] = time.perf_counter()
        try:
            s.send(struct.pack('!q', i) + pad)
        except (BlockingIOError, ConnectionRefusedError):
            sent_at[i] = 0.0
        drain()
    end = time.perf_counter() + wait
    while len(rtt) < count:
        left = end - time.perf_counter()
        if left <= 0:
            break
        r, _, _ = select.select([s], [], [], left)
        if r:
            drain()
    ms = sorted(rtt.values())
    if len(sys.argv) == 8:
        with open(sys.argv[7], 'a') as f:
            f.write(''.join('%.4f\n' % rtt[i] for i in sorted(rtt)))
    print(json.dumps({
        "sent": sum(1 for t in sent_at if t), "answered": len(ms),
        "lost": count - len(ms), "min": pct(ms, 0), "p50": pct(ms, 0.5),
        "p99": pct(ms, 0.99), "max": ms[-1] if ms else None,
    }))


if __name__ == '__main__':
    main()
