#!/usr/bin/python3
# tcp-silent.py HOST PORT PER_SOURCE SECONDS BASE SOURCE...: a half-open
# flood over TCP. From each SOURCE address, keep PER_SOURCE connections to
# HOST:PORT open that never send a byte; each one the server closes is
# opened again at once (after the first PER_SOURCE, at most PER_SOURCE / 2
# a second from each source: a per-prefix rate of 10 a second lets no
# more in), so the flood holds whatever the server lets it. Until BASE.stop exists or
# SECONDS pass; then writes one JSON line to BASE.json:
#   opened          connections made (the TCP handshake finished)
#   closed          ... of which the server closed
#   refused         ... of those, closed within 0.2 s (admission said no)
#   held_max_ms     the longest any connection stayed open before the
#                   server closed it (ms)
#   open_max        the most open at once
#   open_age_max_ms the oldest still open at the end (ms): one the
#                   server's kernel never queued for accept(2) stays open
# and, every second while running, the same figures to BASE.now.
import errno
import json
import os
import select
import socket
import sys
import time

host, port = sys.argv[1], int(sys.argv[2])
per_source, seconds = int(sys.argv[3]), float(sys.argv[4])
base, sources = sys.argv[5], sys.argv[6:]

stats = {"opened": 0, "closed": 0, "refused": 0, "held_max_ms": 0,
         "open_max": 0, "open_age_max_ms": 0}
conns = {}                       # fd -> (socket, source, connected at)
pending = {}                     # fd -> (socket, source): connecting
count = {s: 0 for s in sources}  # open or connecting, per source
budget = {s: float(per_source) for s in sources}


def open_one(src):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    s.bind((src, 0))
    rc = s.connect_ex((host, port))
    if rc not in (0, errno.EINPROGRESS):
        s.close()
        return
    pending[s.fileno()] = (s, src)
    count[src] += 1


def drop(fd, table):
    s, src = table.pop(fd)[:2]
    count[src] -= 1
    s.close()


def dump(path):
    with open(path + ".tmp", "w") as f:
        f.write(json.dumps(stats) + "\n")
    os.replace(path + ".tmp", path)


poller = select.poll()
start = last = time.monotonic()
dumped = start
while time.monotonic() - start < seconds and not os.path.exists(base + ".stop"):
    now = time.monotonic()
    for src in sources:
        budget[src] = min(per_source,
                          budget[src] + (now - last) * per_source / 2)
        while count[src] < per_source and budget[src] >= 1:
            budget[src] -= 1
            open_one(src)
    last = now
    poller = select.poll()
    for fd in pending:
        poller.register(fd, select.POLLOUT)
    for fd in conns:
        poller.register(fd, select.POLLIN)
    for fd, ev in poller.poll(50):
        now = time.monotonic()
        if fd in pending:
            s, src = pending[fd]
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                drop(fd, pending)
                continue
            del pending[fd]
            conns[fd] = (s, src, now)
            stats["opened"] += 1
            stats["open_max"] = max(stats["open_max"], len(conns))
        elif fd in conns:
            s, src, since = conns[fd]
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if data:
                continue
            held = now - since
            stats["closed"] += 1
            if held < 0.2:
                stats["refused"] += 1
            stats["held_max_ms"] = max(stats["held_max_ms"], int(held * 1000))
            drop(fd, conns)
    if time.monotonic() - dumped >= 1:
        dump(base + ".now")
        dumped = time.monotonic()
now = time.monotonic()
for s, src, since in conns.values():
    stats["open_age_max_ms"] = max(stats["open_age_max_ms"],
                                   int((now - since) * 1000))
dump(base + ".json")
