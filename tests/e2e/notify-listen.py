#!/usr/bin/python3
"""Stand in for systemd's notification socket (sd_notify(3)).

  notify-listen.py SOCKET LOG SECONDS

Binds a unix datagram socket at SOCKET (mode 0666, so a program that
dropped root can still send), writes each message it receives to LOG as
one line (newlines inside a message become " | "), and exits after
SECONDS. Standard library only.
"""
import os
import socket
import sys
import time

path, log, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o666)
end = time.monotonic() + secs
with open(log, "a", buffering=1) as out:
    print("ready", flush=True)
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        s.settimeout(left)
        try:
            msg = s.recv(4096)
        except socket.timeout:
            break
        out.write(msg.decode(errors="replace").strip().replace("\n", " | ") + "\n")
