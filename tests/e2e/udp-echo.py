#!/usr/bin/python3
"""UDP echo server and checker for the UDP forward tests.

serve ADDR PORT: answer every datagram with itself, until killed.
check HOST PORT COUNT [--timeout S]: from one socket (one flow), send
COUNT datagrams of sizes from 1 to 1201 bytes with contents that differ
each time, one at a time, and wait for each answer; print JSON with how
many came back byte for byte ("good"), different ("bad") or not at all
("lost").
"""
import json
import socket
import sys


def serve(addr, port):
    fam = socket.AF_INET6 if ':' in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((addr, port))
    while True:
        data, src = s.recvfrom(65535)
        s.sendto(data, src)


def payload(i):
    size = 1 + (i * 397) % 1201
    return bytes((i * 31 + k * 7) & 0xff for k in range(size))


def check(host, port, count, timeout):
    fam = socket.AF_INET6 if ':' in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    s.connect((host, port))
    good = bad = lost = 0
    for i in range(count):
        want = payload(i)
        s.send(want)
        try:
            got = s.recv(65535)
        except socket.timeout:
            lost += 1
            continue
        # A late answer to an earlier datagram is not this one's.
        while got != want and got in (payload(j) for j in range(i)):
            try:
                got = s.recv(65535)
            except socket.timeout:
                got = None
                break
        if got is None:
            lost += 1
        elif got == want:
            good += 1
        else:
            bad += 1
    print(json.dumps({"good": good, "bad": bad, "lost": lost}))


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == 'serve':
        serve(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) >= 5 and sys.argv[1] == 'check':
        timeout = 2.0
        if len(sys.argv) == 7 and sys.argv[5] == '--timeout':
            timeout = float(sys.argv[6])
        check(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), timeout)
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
