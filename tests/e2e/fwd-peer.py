#!/usr/bin/env python3
"""TCP end points with exact byte accounting for the forwarding tests.

Every subcommand prints (or appends to --results) one JSON object per
connection, so a test can compare what one end sent with what the other
end received. Standard library only.

  serve ADDR:PORT [--echo] [--send N] [--after-eof] [--rate B] [--results F]
        [--accepts F]
      Accept connections forever; one thread per connection. Default: read
      everything (at most B bytes/s with --rate) while sending N random
      bytes, then shut down the write side. --after-eof: send only after
      the peer's EOF (a half-closed request answered), --answer-delay S
      seconds after it. --echo: send back
      whatever arrives, then shut down after the peer's EOF. --accepts:
      append a line "accept PEER" to F the moment a connection is
      accepted (before anything is read).
  connect ADDR:PORT [--send N] [--after-eof] [--rate B] [--duration S]
      One connection with the same roles as serve. --duration: stop sending
      after S seconds and abort the connection (RST).
  many ADDR:PORT --conns N --size B
      N concurrent connections to an echo server, each sending its own B
      bytes and checking the echo's sha256 (one thread, selectors).
      --socks HOST:PORT: ADDR is a SOCKS5 proxy, HOST:PORT the echo server.
  limit ADDR:PORT --open N --ready-file F --go-file F
      Hold N echo connections, check that one more is closed without an
      answer, write F (ready), wait for the go file, check the N still echo.
  first ADDR:PORT [--size N] [--send-at NS] [--ready-file F]
      Try to connect every millisecond until something listens (the
      tunnel program starting), send N (default 100) random bytes and read
      their echo; print when the connection was made and when the echo
      was complete (time.time_ns()), and whether it matched. With
      --send-at, the bytes go at that wall-clock time at the earliest.
      --ready-file: created once the interpreter is up and trying.
  chat ADDR:PORT --size N --interval S --duration S
      One connection to an echo server, alive for S seconds: every
      interval, N random bytes go and their echo must come back whole
      and equal before the next; then EOF both ways. Prints the rounds,
      the bytes, the mismatches, the longest round (ms) and errors.
  probe ADDR:PORT [--socks HOST:PORT]
      Connect (through a SOCKS5 proxy with --socks) and measure how soon
      and how the connection is closed: "reset", "eof" or "open".
  nxdns ADDR:PORT
      A DNS server (UDP) that answers every query with NXDOMAIN.

Sizes accept K and M suffixes (powers of 1024). Every wait is bounded by
--timeout (default 120 s).
"""
import argparse
import errno
import hashlib
import json
import os
import selectors
import socket
import struct
import sys
import threading
import time

CHUNK = 65536


def size(text):
    mult = {'K': 1024, 'M': 1024 * 1024}.get(text[-1:].upper(), 1)
    return int(text[:-1] if mult != 1 else text) * mult


def endpoint(text):
    host, _, port = text.rpartition(':')
    return host.strip('[]'), int(port)


class Deadline:
    def __init__(self, secs):
        self.end = time.monotonic() + secs

    def left(self):
        return self.end - time.monotonic()

    def passed(self):
        return self.left() <= 0


def abort(sock):
    """Close with a reset instead of a FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                        struct.pack('ii', 1, 0))
    except OSError:
        pass
    sock.close()


def error_name(e):
    if isinstance(e, socket.timeout):
        return 'timeout'
    if isinstance(e, OSError) and e.errno is not None:
        return errno.errorcode.get(e.errno, str(e.errno))
    return type(e).__name__


class Session:
    """One connection: a sender thread and a receiver in the caller."""

    def __init__(self, sock, args, deadline):
        self.sock = sock
        self.args = args
        self.deadline = deadline
        self.tx = hashlib.sha256()
        self.rx = hashlib.sha256()
        self.ntx = 0
        self.nrx = 0
        self.rx_eof = False
        self.tx_shut = False
        self.errors = []
        self.eof = threading.Event()
        self.started = time.monotonic()
        self.aborted = False

    def send_until(self, data, stop):
        view = memoryview(data)
        while view:
            if stop is not None and time.monotonic() >= stop:
                return False
            if self.deadline.passed():
                raise socket.timeout('deadline')
            try:
                n = self.sock.send(view)
            except socket.timeout:
                continue
            view = view[n:]
            self.ntx += n
        return True

    def sender(self):
        a = self.args
        stop = None
        if a.duration:
            stop = self.started + a.duration
        try:
            if a.after_eof:
                while not self.eof.wait(0.2):
                    if self.deadline.passed():
                        raise socket.timeout('deadline waiting for EOF')
                # The other direction stays half-closed meanwhile.
                time.sleep(a.answer_delay)
            left = a.send
            while left > 0:
                data = os.urandom(min(CHUNK, left))
                if not self.send_until(data, stop):
                    # Time is up: give up on the rest, with a reset.
                    self.aborted = True
                    return
                self.tx.update(data)
                left -= len(data)
            self.sock.shutdown(socket.SHUT_WR)
            self.tx_shut = True
        except OSError as e:
            self.errors.append('send: ' + error_name(e))

    def receiver(self):
        a = self.args
        budget_t = time.monotonic()
        try:
            while True:
                if self.aborted:
                    return
                if self.deadline.passed():
                    raise socket.timeout('deadline')
                want = CHUNK
                if a.rate:
                    # At most `rate` bytes a second, taken in tenths.
                    now = time.monotonic()
                    if now < budget_t:
                        time.sleep(min(budget_t - now, 0.1))
                        continue
                    want = max(1, a.rate // 10)
                    budget_t = now + 0.1
                try:
                    data = self.sock.recv(want)
                except socket.timeout:
                    continue
                if not data:
                    self.rx_eof = True
                    self.eof.set()
                    return
                self.rx.update(data)
                self.nrx += len(data)
        except OSError as e:
            self.errors.append('recv: ' + error_name(e))
            self.eof.set()

    def run(self):
        self.sock.settimeout(0.5)
        t = threading.Thread(target=self.sender, daemon=True)
        t.start()
        self.receiver()
        while t.is_alive() and not self.deadline.passed():
            t.join(0.5)
        if self.aborted:
            abort(self.sock)
        else:
            self.sock.close()
        return {
            'tx': self.ntx,
            'tx_sha': self.tx.hexdigest(),
            'tx_shut': self.tx_shut,
            'aborted': self.aborted,
            'rx': self.nrx,
            'rx_sha': self.rx.hexdigest(),
            'rx_eof': self.rx_eof,
            'errors': self.errors,
            'secs': round(time.monotonic() - self.started, 3),
        }


def echo(sock, deadline):
    n = 0
    errors = []
    sock.settimeout(0.5)
    try:
        while not deadline.passed():
            try:
                data = sock.recv(CHUNK)
            except socket.timeout:
                continue
            if not data:
                sock.shutdown(socket.SHUT_WR)
                break
            # A tunnel that applies back-pressure may hold a send for a
            # while; only the deadline ends the wait (sendall would give
            # up after one 0.5 s timeout, reset, and lose the echo).
            view = memoryview(data)
            while view:
                if deadline.passed():
                    raise socket.timeout('deadline')
                try:
                    view = view[sock.send(view):]
                except socket.timeout:
                    continue
            n += len(data)
    except OSError as e:
        errors.append(error_name(e))
    sock.close()
    return {'echoed': n, 'errors': errors}


def emit(results, lock, obj):
    line = json.dumps(obj, sort_keys=True)
    with lock:
        if results is None:
            print(line, flush=True)
        else:
            with open(results, 'a') as f:
                f.write(line + '\n')


def cmd_serve(a):
    host, port = endpoint(a.addr)
    fam = socket.AF_INET6 if ':' in host else socket.AF_INET
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    small_rcvbuf(ls, a)
    ls.bind((host, port))
    ls.listen(512)
    lock = threading.Lock()

    def handle(sock, peer):
        deadline = Deadline(a.timeout)
        if a.echo:
            r = echo(sock, deadline)
        else:
            r = Session(sock, a, deadline).run()
        r['peer'] = '%s:%d' % peer[:2]
        emit(a.results, lock, r)

    while True:
        sock, peer = ls.accept()
        if a.accepts:
            with lock, open(a.accepts, 'a') as f:
                f.write('accept %s:%d\n' % peer[:2])
        threading.Thread(target=handle, args=(sock, peer), daemon=True).start()


def cmd_first(a):
    """The first echoed message through a forward that is coming up."""
    deadline = Deadline(a.timeout)
    msg = os.urandom(a.size)
    if a.ready_file:
        open(a.ready_file, 'w').close()
    while True:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if s.connect_ex(endpoint(a.addr)) == 0:
            break
        s.close()
        if deadline.passed():
            print(json.dumps({'ok': 0, 'error': 'nothing listens'}), flush=True)
            return 1
        time.sleep(0.001)
    connected = time.time_ns()
    if a.send_at and a.send_at > connected:
        time.sleep((a.send_at - connected) / 1e9)
    s.settimeout(max(0.1, deadline.left()))
    got = b''
    err = None
    try:
        s.sendall(msg)
        while len(got) < len(msg):
            data = s.recv(len(msg) - len(got))
            if not data:
                err = 'eof'
                break
            got += data
    except OSError as e:
        err = error_name(e)
    done = time.time_ns()
    s.close()
    r = {'ok': int(got == msg), 'connected_ns': connected, 'done_ns': done,
         'rx': len(got), 'error': err}
    print(json.dumps(r, sort_keys=True), flush=True)
    return 0 if got == msg else 1


def small_rcvbuf(sock, a):
    """A slow reader keeps its kernel buffer small, as a slow device's
    would be: else megabytes queued in it hide a reset behind them (Linux
    delivers queued data before the error)."""
    if a.rate:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)


def cmd_connect(a):
    deadline = Deadline(a.timeout)
    host, port = endpoint(a.addr)
    fam = socket.AF_INET6 if ':' in host else socket.AF_INET
    sock = socket.socket(fam, socket.SOCK_STREAM)
    small_rcvbuf(sock, a)
    sock.settimeout(a.timeout)
    sock.connect((host, port))
    r = Session(sock, a, deadline).run()
    print(json.dumps(r, sort_keys=True), flush=True)
    return 0 if not r['errors'] or a.duration else 1


def cmd_chat(a):
    deadline = Deadline(a.timeout)
    host, port = endpoint(a.addr)
    fam = socket.AF_INET6 if ':' in host else socket.AF_INET
    sock = socket.socket(fam, socket.SOCK_STREAM)
    sock.settimeout(a.timeout)
    sock.connect((host, port))
    r = {'rounds': 0, 'bytes': 0, 'mismatches': 0, 'longest_ms': 0,
         'rx_eof': False, 'errors': []}
    end = time.monotonic() + a.duration
    try:
        while time.monotonic() < end and not deadline.passed():
            t0 = time.monotonic()
            data = os.urandom(a.size)
            sock.sendall(data)
            back = recv_exact(sock, len(data))
            if back != data:
                r['mismatches'] += 1
            r['rounds'] += 1
            r['bytes'] += len(data)
            took = time.monotonic() - t0
            r['longest_ms'] = max(r['longest_ms'], round(took * 1000))
            time.sleep(max(0.0, a.interval - took))
        sock.shutdown(socket.SHUT_WR)
        r['rx_eof'] = sock.recv(1) == b''
    except OSError as e:
        r['errors'].append(error_name(e))
    sock.close()
    print(json.dumps(r, sort_keys=True), flush=True)
    return 0 if not r['errors'] and not r['mismatches'] else 1


def cmd_many(a):
    """N echo connections at once from one thread."""
    deadline = Deadline(a.timeout)
    pool = os.urandom(a.size)
    sel = selectors.DefaultSelector()
    conns = []
    for i in range(a.conns):
        # Each connection sends the pool rotated by its own offset, so a
        # byte that strays into another connection changes that one's hash.
        k = (i * 7919) % a.size
        parts = [memoryview(pool)[k:], memoryview(pool)[:k]]
        want = hashlib.sha256(parts[0])
        want.update(parts[1])
        fam = socket.AF_INET6 if ':' in endpoint(a.addr)[0] else \
            socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        c = {'i': i, 'sock': s, 'parts': [p for p in parts if len(p)],
             'want': want.hexdigest(), 'rx': hashlib.sha256(), 'nrx': 0,
             'shut': False, 'done': False, 'error': None}
        err = 0
        if a.socks:
            # The SOCKS handshake first, blocking, then as any other.
            try:
                s.settimeout(max(0.1, deadline.left()))
                s.connect(endpoint(a.addr))
                rep = socks_connect(s, a.socks)
                if rep != 0:
                    raise ConnectionError('socks reply %d' % rep)
            except OSError as e:
                err = e.errno or errno.ECONNABORTED
        s.setblocking(False)
        if not a.socks:
            err = s.connect_ex(endpoint(a.addr))
        if err not in (0, errno.EINPROGRESS):
            c['error'] = 'connect: ' + errno.errorcode.get(err, str(err))
            c['done'] = True
            s.close()
        else:
            sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, c)
        conns.append(c)
    pending = sum(1 for c in conns if not c['done'])
    start = time.monotonic()
    while pending and not deadline.passed():
        for key, ev in sel.select(timeout=min(1.0, max(0.01, deadline.left()))):
            c = key.data
            s = c['sock']
            try:
                if ev & selectors.EVENT_WRITE and not c['shut']:
                    while c['parts']:
                        n = s.send(c['parts'][0])
                        c['parts'][0] = c['parts'][0][n:]
                        if not len(c['parts'][0]):
                            c['parts'].pop(0)
                    s.shutdown(socket.SHUT_WR)
                    c['shut'] = True
                    sel.modify(s, selectors.EVENT_READ, c)
            except BlockingIOError:
                pass
            except OSError as e:
                c['error'] = 'send: ' + error_name(e)
            try:
                if c['error'] is None and ev & selectors.EVENT_READ:
                    while True:
                        data = s.recv(CHUNK)
                        if not data:
                            if c['nrx'] != a.size:
                                c['error'] = 'eof after %d bytes' % c['nrx']
                            elif c['rx'].hexdigest() != c['want']:
                                c['error'] = 'sha256 mismatch'
                            c['done'] = True
                            break
                        c['rx'].update(data)
                        c['nrx'] += len(data)
            except BlockingIOError:
                pass
            except OSError as e:
                c['error'] = 'recv: ' + error_name(e)
            if c['error'] is not None or c['done']:
                c['done'] = True
                sel.unregister(s)
                s.close()
                pending -= 1
    bad = []
    for c in conns:
        if not c['done']:
            c['error'] = 'unfinished after %d of %d bytes' % (c['nrx'], a.size)
            c['sock'].close()
        if c['error'] is not None:
            bad.append('%d: %s' % (c['i'], c['error']))
    r = {'conns': a.conns, 'ok': a.conns - len(bad), 'bad': bad[:20],
         'secs': round(time.monotonic() - start, 3)}
    print(json.dumps(r, sort_keys=True), flush=True)
    return 0 if not bad else 1


def roundtrip(sock, data, deadline):
    sock.sendall(data)
    got = b''
    while len(got) < len(data):
        if deadline.passed():
            raise socket.timeout('deadline')
        try:
            part = sock.recv(len(data) - len(got))
        except socket.timeout:
            continue
        if not part:
            raise ConnectionError('eof')
        got += part
    return got == data


def closed_how(sock, secs):
    """Wait up to secs for the peer to close: 'reset', 'eof' or 'open'."""
    end = time.monotonic() + secs
    sock.settimeout(0.05)
    while time.monotonic() < end:
        try:
            data = sock.recv(CHUNK)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return 'reset'
        except OSError as e:
            return error_name(e)
        if not data:
            return 'eof'
    return 'open'


def cmd_limit(a):
    deadline = Deadline(a.timeout)
    r = {'held': 0, 'echo_before': 0, 'echo_after': 0, 'errors': []}
    held = []
    for i in range(a.open):
        s = socket.create_connection(endpoint(a.addr), timeout=5)
        s.settimeout(0.5)
        held.append(s)
        try:
            if roundtrip(s, b'hello %d\n' % i, deadline):
                r['echo_before'] += 1
        except OSError as e:
            r['errors'].append('before %d: %s' % (i, error_name(e)))
    r['held'] = len(held)
    t0 = time.monotonic()
    try:
        # The reset may come before connect() even returns.
        extra = socket.create_connection(endpoint(a.addr), timeout=5)
    except ConnectionResetError:
        r['extra'] = 'reset'
    else:
        try:
            extra.sendall(b'one too many\n')
        except OSError:
            pass
        r['extra'] = closed_how(extra, 5)
        extra.close()
    r['extra_ms'] = round((time.monotonic() - t0) * 1000, 1)
    with open(a.ready_file, 'w') as f:
        f.write(json.dumps(r, sort_keys=True) + '\n')
    while not os.path.exists(a.go_file) and not deadline.passed():
        time.sleep(0.05)
    for i, s in enumerate(held):
        try:
            if roundtrip(s, os.urandom(65536), deadline):
                r['echo_after'] += 1
        except OSError as e:
            r['errors'].append('after %d: %s' % (i, error_name(e)))
        s.shutdown(socket.SHUT_WR)
        if closed_how(s, 5) != 'eof':
            r['errors'].append('close %d: no clean EOF' % i)
        s.close()
    print(json.dumps(r, sort_keys=True), flush=True)
    return 0


def socks_connect(sock, target):
    """SOCKS5 CONNECT (no authentication); returns the reply code."""
    host, port = endpoint(target)
    sock.sendall(b'\x05\x01\x00')
    if recv_exact(sock, 2) != b'\x05\x00':
        raise ConnectionError('socks method refused')
    try:
        req = b'\x05\x01\x00\x01' + socket.inet_aton(host)
    except OSError:
        try:
            req = b'\x05\x01\x00\x04' + socket.inet_pton(socket.AF_INET6, host)
        except OSError:
            name = host.encode()
            req = b'\x05\x01\x00\x03' + bytes([len(name)]) + name
    sock.sendall(req + struct.pack('!H', port))
    head = recv_exact(sock, 4)
    rest = {1: 4, 4: 16}.get(head[3], 0)
    if head[3] == 3:
        rest = recv_exact(sock, 1)[0]
    recv_exact(sock, rest + 2)
    return head[1]


def recv_exact(sock, n):
    got = b''
    while len(got) < n:
        part = sock.recv(n - len(got))
        if not part:
            raise ConnectionError('eof after %d of %d bytes' % (len(got), n))
        got += part
    return got


def cmd_probe(a):
    r = {'socks_rep': None}
    t0 = time.monotonic()
    try:
        sock = socket.create_connection(endpoint(a.addr), timeout=a.timeout)
    except ConnectionResetError:
        # Reset before connect() even returned.
        r['closed'] = 'reset'
        r['ms'] = round((time.monotonic() - t0) * 1000, 1)
        print(json.dumps(r, sort_keys=True), flush=True)
        return 0
    try:
        if a.socks:
            r['socks_rep'] = socks_connect(sock, a.socks)
    except ConnectionResetError:
        r['socks_error'] = 'reset'
    except OSError as e:
        r['socks_error'] = error_name(e)
    r['closed'] = closed_how(sock, a.timeout)
    r['ms'] = round((time.monotonic() - t0) * 1000, 1)
    sock.close()
    print(json.dumps(r, sort_keys=True), flush=True)
    return 0


def cmd_nxdns(a):
    host, port = endpoint(a.addr)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, port))
    while True:
        q, peer = s.recvfrom(4096)
        if len(q) < 12:
            continue
        qid, flags, qd = struct.unpack('!HHH', q[:6])
        # The question section ends after the name's zero label + 4 bytes.
        i = 12
        while i < len(q) and q[i] != 0:
            i += 1 + q[i]
        question = q[12:i + 5] if qd == 1 else b''
        rflags = 0x8000 | (flags & 0x7900) | 0x0080 | 3  # QR, RA, NXDOMAIN
        s.sendto(struct.pack('!HHHHHH', qid, rflags, 1 if question else 0,
                             0, 0, 0) + question, peer)
        print('nxdns: answered %d-byte query from %s' % (len(q), peer[0]),
              flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = p.add_subparsers(dest='cmd', required=True)

    def common(sp):
        sp.add_argument('addr')
        sp.add_argument('--timeout', type=float, default=120)

    for name in ('serve', 'connect'):
        sp = sub.add_parser(name)
        common(sp)
        sp.add_argument('--send', type=size, default=0)
        sp.add_argument('--after-eof', action='store_true')
        sp.add_argument('--answer-delay', type=float, default=0)
        sp.add_argument('--rate', type=size, default=0)
        sp.add_argument('--duration', type=float, default=0)
        if name == 'serve':
            sp.add_argument('--echo', action='store_true')
            sp.add_argument('--results')
            sp.add_argument('--accepts')
    sp = sub.add_parser('many')
    common(sp)
    sp.add_argument('--conns', type=int, required=True)
    sp.add_argument('--size', type=size, required=True)
    sp.add_argument('--socks', metavar='TARGET',
                    help='ADDR is a SOCKS5 proxy; connect through it to TARGET')
    sp = sub.add_parser('limit')
    common(sp)
    sp.add_argument('--open', type=int, required=True)
    sp.add_argument('--ready-file', required=True)
    sp.add_argument('--go-file', required=True)
    sp = sub.add_parser('first')
    common(sp)
    sp.add_argument('--size', type=size, default=100)
    sp.add_argument('--send-at', type=int, default=0)
    sp.add_argument('--ready-file')
    sp = sub.add_parser('chat')
    common(sp)
    sp.add_argument('--size', type=size, required=True)
    sp.add_argument('--interval', type=float, required=True)
    sp.add_argument('--duration', type=float, required=True)
    sp = sub.add_parser('probe')
    common(sp)
    sp.add_argument('--socks')
    sp = sub.add_parser('nxdns')
    sp.add_argument('addr')
    a = p.parse_args()
    return {'serve': cmd_serve, 'connect': cmd_connect, 'many': cmd_many,
            'limit': cmd_limit, 'probe': cmd_probe, 'chat': cmd_chat, 'first': cmd_first,
            'nxdns': cmd_nxdns}[a.cmd](a)


if __name__ == '__main__':
    sys.exit(main())
