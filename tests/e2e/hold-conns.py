#!/usr/bin/python3
# hold-conns.py PORT N BASE [SECONDS]: open N TCP connections to
# 127.0.0.1:PORT that never send a byte (an idle local client, a silent
# SOCKS client), write how many were made to BASE.n, and hold them until
# BASE.stop exists or SECONDS (default 60) pass.
import os
import resource
import socket
import sys
import time

port, n, base = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
hold_s = float(sys.argv[4]) if len(sys.argv) > 4 else 60.0
# As many descriptors as the hard limit allows: N may exceed the soft one.
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = []
for _ in range(n):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
    except OSError:
        s.close()
        continue
    held.append(s)
with open(base + ".n", "w") as f:
    f.write("%d\n" % len(held))
end = time.monotonic() + hold_s
while time.monotonic() < end and not os.path.exists(base + ".stop"):
    time.sleep(0.1)
