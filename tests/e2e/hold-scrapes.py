#!/usr/bin/python3
# hold-scrapes.py PORT N BASE [SECONDS [RENEW]]: N scrapers that each send
# GET /metrics to 127.0.0.1:PORT and never read the answer, holding the
# connection until BASE.stop exists or SECONDS (default 60) pass; with
# RENEW, each closes and asks again every RENEW seconds. Writes the
# number of requests sent to BASE.n after the first round, and the
# number of rounds so far to BASE.round after each.
import os
import socket
import sys
import time

port, n, base = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
hold_s = float(sys.argv[4]) if len(sys.argv) > 4 else 60.0
renew_s = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
REQ = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def ask():
    s = socket.socket()
    # A small receive window: the answer stalls after a few KiB.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(REQ)
    except OSError:
        s.close()
        return None
    return s


held = [ask() for _ in range(n)]
sent = sum(s is not None for s in held)
rounds = 1
with open(base + ".n", "w") as f:
    f.write("%d\n" % sent)
with open(base + ".round", "w") as f:
    f.write("%d\n" % rounds)
end = time.monotonic() + hold_s
renew_at = time.monotonic() + renew_s
while time.monotonic() < end and not os.path.exists(base + ".stop"):
    if renew_s > 0 and time.monotonic() >= renew_at:
        for i, s in enumerate(held):
            if s is not None:
                s.close()
            held[i] = ask()
        rounds += 1
        with open(base + ".round.new", "w") as f:
            f.write("%d\n" % rounds)
        os.rename(base + ".round.new", base + ".round")
        renew_at = time.monotonic() + renew_s
    time.sleep(0.1)
