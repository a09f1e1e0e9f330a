#!/usr/bin/env python3
"""Traffic, capture and analysis for the roaming tests (test-roam-*.sh) and
bench/roam.sh. Standard library only; every wait is bounded.

  sniff IFACE PORT OUT [--timeout S] [--head N]
      Record every UDP datagram to or from PORT seen on IFACE (both
      directions; GSO super-packets split into their segments) as lines
      "TIME_NS SRC:PORT DST:PORT HEX" in OUT (with --head, only the first
      N bytes of each payload). Prints "ready" once capturing.
  flight CAPTURE --to ADDR:PORT [--after NS]
      The QUIC long-header packets in the datagrams sent to ADDR:PORT (after
      NS): counts per type, the first Initial's destination connection ID,
      the 0-RTT packets of that connection (number, largest length, time of
      the first). JSON.
  replay CAPTURE ADDR:PORT [--after NS] [--wait S] [--to ADDR:PORT]
      Send again, from a fresh socket, every datagram of the first
      connection attempt after NS (those from the first Initial's source
      whose long headers carry its destination connection ID), in captured
      order; then count the answers for S seconds. JSON. With --to, the
      attempt captured on its way to that address is sent to ADDR:PORT
      (another member of a server group).
  udp-send ADDR:PORT [--interval S] [--duration S] [--size N]
      Datagrams numbered from 0, each carrying its number and send time;
      send errors (no route while roaming) are counted and ignored. JSON.
  udp-sink ADDR:PORT OUT [--timeout S]
      Record every datagram from udp-send as "SEQ SENT_NS RECV_NS" in OUT.
  dups SINKFILE
      Received, unique and duplicated sequence numbers. JSON.
  arrivals SINKFILE --t0 NS [--restored]
      Delivery after an event at NS: the first datagram sent at or after
      NS (its delivery time after NS), the first delivery of any datagram
      after NS, the longest delivery gap after NS, the datagrams sent after
      NS that never arrived, and with --restored the delivery time of the
      first datagram after the last lost one. Milliseconds; JSON.
  xfer-serve ADDR:PORT [--timeout S]
      Accept connections one after another; read each to EOF and answer
      "BYTES SHA256" before closing.
  xfer-send ADDR:PORT BYTES [--duration S] [--timeout S]
      Send BYTES random bytes, paced over S seconds, half-close, and compare
      the server's count and sha256 with what was sent. JSON, "ok": 1 on a
      match.
  gaps PINGLOG [--after SECONDS]
      From `ping -D -n` output: sent, received, loss in percent, the longest
      gap between consecutive replies (ms, with the time it ended), and with
      --after the delay from that time to the first reply. JSON.
  moves CAPTURE --server ADDR:PORT [--pings PINGLOG]
      A client's moves from one local port to the next, from a capture on
      its side (sniff): for each move, when the old flow last heard from
      the server (the cut), and after that, in milliseconds, the first
      packet from the new port (detect_ms) and the first answer to it
      (answer_ms); with --pings, the first ping reply after the move
      (recover_ms) and the gap in the replies across it (gap_ms). JSON.

Sizes accept K and M suffixes (powers of 1024).
"""
import argparse
import hashlib
import json
import os
import re
import select
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
SO_RCVBUFFORCE = 33
SOL_PACKET = 263
PACKET_VNET_HDR = 15
VNET_HDR_LEN = 10
VIRTIO_NET_HDR_GSO_UDP_L4 = 5

LONG_TYPES = {0: 'initial', 1: 'zero_rtt', 2: 'handshake', 3: 'retry'}


def size(text):
    mult = {'K': 1024, 'M': 1024 * 1024}.get(text[-1:].upper(), 1)
    return int(text[:-1] if mult != 1 else text) * mult


def endpoint(text):
    host, _, port = text.rpartition(':')
    return host.strip('[]'), int(port)


def out(doc):
    print(json.dumps(doc, sort_keys=True), flush=True)


def term_exits():
    """SIGTERM ends the program through the normal exit path."""
    def handler(signum, frame):
        raise SystemExit(0)
    signal.signal(signal.SIGTERM, handler)


# ---- capture -----------------------------------------------------------

def udp_segments(frame, vnet):
    """(src, sport, dst, dport, payload) for each UDP datagram of an
    Ethernet frame that may be a GSO super-packet."""
    gso_size = 0
    if len(frame) < VNET_HDR_LEN + 14:
        return []
    _, gso_type, _, gso, _, _ = struct.unpack('<BBHHHH', vnet)
    if gso_type & 0x7f == VIRTIO_NET_HDR_GSO_UDP_L4:
        gso_size = gso
    eth = frame[VNET_HDR_LEN:]
    if struct.unpack('!H', eth[12:14])[0] != 0x0800:
        return []
    ip = eth[14:]
    if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 17:
        return []
    ihl = (ip[0] & 0x0f) * 4
    total = struct.unpack('!H', ip[2:4])[0]
    ip = ip[:total] if total >= ihl + 8 else ip
    src = socket.inet_ntoa(ip[12:16])
    dst = socket.inet_ntoa(ip[16:20])
    udp = ip[ihl:]
    if len(udp) < 8:
        return []
    sport, dport = struct.unpack('!HH', udp[:4])
    payload = udp[8:]
    if gso_size == 0:
        return [(src, sport, dst, dport, payload)]
    return [(src, sport, dst, dport, payload[i:i + gso_size])
            for i in range(0, len(payload), gso_size)]


def cmd_sniff(a):
    term_exits()
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)
    except OSError:
        pass
    s.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
    s.bind((a.iface, 0))
    end = time.monotonic() + a.timeout
    with open(a.out, 'w') as f:
        print('ready', flush=True)
        while time.monotonic() < end:
            r, _, _ = select.select([s], [], [], min(1.0, end - time.monotonic()))
            if not r:
                continue
            frame = s.recv(65536 + VNET_HDR_LEN + 64)
            now = time.time_ns()
            for src, sport, dst, dport, pl in udp_segments(frame, frame[:VNET_HDR_LEN]):
                if sport != a.port and dport != a.port:
                    continue
                if a.head is not None:
                    pl = pl[:a.head]
                f.write('%d %s:%d %s:%d %s\n' % (now, src, sport, dst, dport, pl.hex()))
            f.flush()
    return 0


def read_capture(path):
    recs = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 4:
                continue
            recs.append((int(parts[0]), parts[1], parts[2], bytes.fromhex(parts[3])))
    return recs


def varint(b, off):
    if off >= len(b):
        raise ValueError('truncated varint')
    n = 1 << (b[off] >> 6)
    if off + n > len(b):
        raise ValueError('truncated varint')
    v = b[off] & 0x3f
    for i in range(1, n):
        v = (v << 8) | b[off + i]
    return v, off + n


def long_packets(d):
    """The long-header packets at the front of a datagram, as
    (type name, destination CID, length of the packet)."""
    pkts = []
    off = 0
    while off < len(d) and d[off] & 0x80:
        try:
            first = d[off]
            version = struct.unpack('!I', d[off + 1:off + 5])[0]
            if version == 0:
                break
            p = off + 5
            dcil = d[p]
            dcid = d[p + 1:p + 1 + dcil]
            p += 1 + dcil
            scil = d[p]
            p += 1 + scil
            kind = (first >> 4) & 0x3
            if kind == 3:
                pkts.append(('retry', dcid.hex(), len(d) - off))
                break
            if kind == 0:
                toklen, p = varint(d, p)
                p += toklen
            length, p = varint(d, p)
            end = p + length
            if end > len(d):
                break
            pkts.append((LONG_TYPES[kind], dcid.hex(), end - off))
            off = end
        except (ValueError, IndexError, struct.error):
            break
    return pkts


def attempt(recs, to, after):
    """The datagrams to `to` of the first connection attempt after `after`:
    those whose long headers carry the first Initial's DCID."""
    sent = [r for r in recs if r[2] == to and r[0] >= after]
    dcid = src = None
    for r in sent:
        for kind, cid, _ in long_packets(r[3]):
            if kind == 'initial':
                dcid, src = cid, r[1]
                break
        if dcid is not None:
            break
    if dcid is None:
        return None, []
    # From the client's address only: a capture also holds our replays.
    return dcid, [r for r in sent if r[1] == src and
                  any(cid == dcid for _, cid, _ in long_packets(r[3]))]


def cmd_flight(a):
    recs = read_capture(a.capture)
    counts = {k: 0 for k in LONG_TYPES.values()}
    for r in recs:
        if r[2] == a.to and r[0] >= a.after:
            for kind, _, _ in long_packets(r[3]):
                counts[kind] += 1
    dcid, flight = attempt(recs, a.to, a.after)
    zrtt = [(r[0], n) for r in flight for kind, _, n in long_packets(r[3])
            if kind == 'zero_rtt']
    first_initial = flight[0][0] if flight else None
    out({'counts': counts, 'dcid': dcid, 'datagrams': len(flight),
         'zero_rtt': len(zrtt),
         'zero_rtt_max_len': max((n for _, n in zrtt), default=0),
         'first_initial_ns': first_initial,
         'first_zero_rtt_ns': zrtt[0][0] if zrtt else None})
    return 0


def cmd_replay(a):
    recs = read_capture(a.capture)
    host, port = endpoint(a.server)
    # The flight captured on its way to --to (another server of a group)
    # or to the server it is sent to.
    dcid, flight = attempt(recs, a.to or a.server, a.after)
    kinds = {k: 0 for k in LONG_TYPES.values()}
    for r in flight:
        for kind, _, _ in long_packets(r[3]):
            kinds[kind] += 1
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for r in flight:
        s.sendto(r[3], (host, port))
    answers = 0
    answer_bytes = 0
    end = time.monotonic() + a.wait
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        rd, _, _ = select.select([s], [], [], left)
        if not rd:
            break
        d = s.recv(65536)
        answers += 1
        answer_bytes += len(d)
    out({'dcid': dcid, 'sent': len(flight), 'packets': kinds,
         'answers': answers, 'answer_bytes': answer_bytes})
    return 0 if flight else 1


# ---- numbered datagrams -------------------------------------------------

def cmd_udp_send(a):
    term_exits()
    host, port = endpoint(a.dest)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    pad = b'\0' * max(0, a.size - 16)
    seq = errors = 0
    start = time.monotonic()
    try:
        while time.monotonic() - start < a.duration:
            try:
                s.sendto(struct.pack('!QQ', seq, time.time_ns()) + pad, (host, port))
            except OSError:
                errors += 1
            seq += 1
            due = start + seq * a.interval
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    finally:
        out({'sent': seq, 'errors': errors})
    return 0


def cmd_udp_sink(a):
    term_exits()
    host, port = endpoint(a.bind)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((host, port))
    end = time.monotonic() + a.timeout
    with open(a.out, 'w') as f:
        print('ready', flush=True)
        while time.monotonic() < end:
            r, _, _ = select.select([s], [], [], min(1.0, end - time.monotonic()))
            if not r:
                continue
            d = s.recv(65536)
            now = time.time_ns()
            if len(d) < 16:
                continue
            seq, sent = struct.unpack('!QQ', d[:16])
            f.write('%d %d %d\n' % (seq, sent, now))
            f.flush()
    return 0


def read_sink(path):
    rows = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) == 3:
                rows.append((int(p[0]), int(p[1]), int(p[2])))
    return rows


def cmd_dups(a):
    rows = read_sink(a.sinkfile)
    seen = {}
    for seq, _, _ in rows:
        seen[seq] = seen.get(seq, 0) + 1
    dups = sorted(s for s, n in seen.items() if n > 1)
    out({'received': len(rows), 'unique': len(seen),
         'duplicates': sum(n - 1 for n in seen.values()), 'dup_seqs': dups[:20]})
    return 0


def cmd_arrivals(a):
    rows = sorted(read_sink(a.sinkfile))
    t0 = a.t0
    res = {'first_sent_after_ms': None, 'first_delivery_ms': None,
           'max_gap_ms': None, 'lost_after': None, 'restored_ms': None}
    delivered = sorted(r[2] for r in rows if r[2] >= t0)
    if delivered:
        res['first_delivery_ms'] = (delivered[0] - t0) / 1e6
        gaps = [y - x for x, y in zip([t0] + delivered, delivered)]
        res['max_gap_ms'] = max(gaps) / 1e6
    after = [r for r in rows if r[1] >= t0]
    if not after:
        out(res)
        return 0
    first = after[0]
    res['first_sent_after_ms'] = (first[2] - t0) / 1e6
    # Lost datagrams leave no send time: the sender's numbers advance at a
    # fixed interval, so the first number sent at or after t0 follows from
    # the last one that arrived from before t0.
    steps = [y[1] - x[1] for x, y in zip(rows, rows[1:]) if y[0] == x[0] + 1]
    before = [r for r in rows if r[1] < t0]
    k_first = first[0]
    if before and steps:
        dt = sorted(steps)[len(steps) // 2]
        k0, s0 = before[-1][0], before[-1][1]
        k_first = min(first[0], k0 + max(1, -(-(t0 - s0) // max(dt, 1))))
    got = {r[0]: r[2] for r in after}
    k_last = after[-1][0]
    missing = [k for k in range(k_first, k_last + 1) if k not in got]
    res['lost_after'] = len(missing)
    if a.restored:
        tail = [k for k in got if not missing or k > missing[-1]]
        res['restored_ms'] = (got[min(tail)] - t0) / 1e6 if tail else None
    out(res)
    return 0


# ---- bulk TCP ------------------------------------------------------------

def cmd_xfer_serve(a):
    term_exits()
    host, port = endpoint(a.bind)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(8)
    end = time.monotonic() + a.timeout
    print('ready', flush=True)
    while time.monotonic() < end:
        r, _, _ = select.select([ls], [], [], min(1.0, end - time.monotonic()))
        if not r:
            continue
        c, _ = ls.accept()
        c.settimeout(max(1.0, end - time.monotonic()))
        h = hashlib.sha256()
        n = 0
        try:
            while True:
                d = c.recv(1 << 16)
                if not d:
                    break
                h.update(d)
                n += len(d)
            c.sendall(('%d %s\n' % (n, h.hexdigest())).encode())
        except OSError as e:
            print('connection failed after %d bytes: %s' % (n, e), flush=True)
        c.close()
        print('received %d bytes' % n, flush=True)
    return 0


def cmd_xfer_send(a):
    host, port = endpoint(a.dest)
    total = size(a.bytes)
    start = time.monotonic()
    res = {'ok': 0, 'bytes': total, 'sent': 0}
    try:
        s = socket.create_connection((host, port), timeout=a.timeout)
        s.settimeout(a.timeout)
        h = hashlib.sha256()
        sent = 0
        chunk = 1 << 16
        while sent < total:
            d = os.urandom(min(chunk, total - sent))
            s.sendall(d)
            h.update(d)
            sent += len(d)
            res['sent'] = sent
            # Paced: byte k leaves no earlier than k/total of the duration.
            due = start + a.duration * sent / total
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        s.shutdown(socket.SHUT_WR)
        reply = b''
        while not reply.endswith(b'\n'):
            d = s.recv(256)
            if not d:
                break
            reply += d
        s.close()
        got = reply.decode(errors='replace').split()
        res['sha_sent'] = h.hexdigest()
        res['bytes_received'] = int(got[0]) if len(got) == 2 else None
        res['sha_received'] = got[1] if len(got) == 2 else None
        res['ok'] = int(res['bytes_received'] == total and
                        res['sha_received'] == res['sha_sent'])
    except (OSError, ValueError) as e:
        res['error'] = str(e)
    res['secs'] = round(time.monotonic() - start, 3)
    out(res)
    return 0 if res['ok'] else 1


# ---- ping ----------------------------------------------------------------

REPLY = re.compile(r'^\[(\d+\.\d+)\] \d+ bytes from .*icmp_seq=(\d+)')
SUMMARY = re.compile(r'(\d+) packets transmitted, (\d+) received')


def cmd_gaps(a):
    replies = []
    sent = received = None
    with open(a.pinglog) as f:
        for line in f:
            m = REPLY.match(line)
            if m:
                replies.append((float(m.group(1)), int(m.group(2))))
                continue
            m = SUMMARY.search(line)
            if m:
                sent, received = int(m.group(1)), int(m.group(2))
    res = {'sent': sent, 'received': received, 'loss_pct': None,
           'max_gap_ms': None, 'gap_end': None, 'first_after_ms': None}
    if sent:
        res['loss_pct'] = round(100.0 * (sent - received) / sent, 3)
    times = sorted(t for t, _ in replies)
    if len(times) >= 2:
        gap, end = max((b - a, b) for a, b in zip(times, times[1:]))
        res['max_gap_ms'] = round(gap * 1000, 1)
        res['gap_end'] = end
    if a.after is not None:
        later = [t for t in times if t >= a.after]
        if later:
            res['first_after_ms'] = round((later[0] - a.after) * 1000, 1)
    out(res)
    return 0


def ping_replies(path):
    """The wall-clock times (ns) of the replies in `ping -D -n` output."""
    times = []
    with open(path) as f:
        for line in f:
            m = REPLY.match(line)
            if m:
                times.append(int(float(m.group(1)) * 1e9))
    return sorted(times)


def cmd_moves(a):
    flows = {}
    order = []
    for t, src, dst, _ in read_capture(a.capture):
        if dst == a.server:
            key, way = src, 'tx'
        elif src == a.server:
            key, way = dst, 'rx'
        else:
            continue
        if key not in flows:
            flows[key] = {}
            order.append(key)
        f = flows[key]
        f.setdefault('first_' + way, t)
        f['last_' + way] = t
    pings = ping_replies(a.pings) if a.pings else []
    rows = []
    for old, new in zip(order, order[1:]):
        o, n = flows[old], flows[new]
        cut, moved = o.get('last_rx'), n.get('first_tx')
        if cut is None or moved is None:
            continue
        row = {'from': old, 'to': new, 'cut_ns': cut,
               'detect_ms': round((moved - cut) / 1e6, 1),
               'answer_ms': None, 'recover_ms': None, 'gap_ms': None}
        if 'first_rx' in n:
            row['answer_ms'] = round((n['first_rx'] - cut) / 1e6, 1)
        before = [p for p in pings if p < moved]
        after = [p for p in pings if p >= moved]
        if after:
            row['recover_ms'] = round((after[0] - cut) / 1e6, 1)
            if before:
                row['gap_ms'] = round((after[0] - before[-1]) / 1e6, 1)
        rows.append(row)

    def most(key):
        vals = [r[key] for r in rows]
        return None if not vals or None in vals else max(vals)
    out({'moves': len(rows), 'flows': len(order), 'max_detect_ms': most('detect_ms'),
         'max_answer_ms': most('answer_ms'), 'max_recover_ms': most('recover_ms'),
         'max_gap_ms': most('gap_ms'), 'rows': rows})
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest='cmd', required=True)

    c = sub.add_parser('sniff')
    c.add_argument('iface')
    c.add_argument('port', type=int)
    c.add_argument('out')
    c.add_argument('--timeout', type=float, default=300)
    c.add_argument('--head', type=int)
    c.set_defaults(fn=cmd_sniff)

    c = sub.add_parser('flight')
    c.add_argument('capture')
    c.add_argument('--to', required=True)
    c.add_argument('--after', type=int, default=0)
    c.set_defaults(fn=cmd_flight)

    c = sub.add_parser('replay')
    c.add_argument('capture')
    c.add_argument('server')
    c.add_argument('--after', type=int, default=0)
    c.add_argument('--wait', type=float, default=1.0)
    c.add_argument('--to', default=None)
    c.set_defaults(fn=cmd_replay)

    c = sub.add_parser('udp-send')
    c.add_argument('dest')
    c.add_argument('--interval', type=float, default=0.01)
    c.add_argument('--duration', type=float, default=10)
    c.add_argument('--size', type=int, default=64)
    c.set_defaults(fn=cmd_udp_send)

    c = sub.add_parser('udp-sink')
    c.add_argument('bind')
    c.add_argument('out')
    c.add_argument('--timeout', type=float, default=300)
    c.set_defaults(fn=cmd_udp_sink)

    c = sub.add_parser('dups')
    c.add_argument('sinkfile')
    c.set_defaults(fn=cmd_dups)

    c = sub.add_parser('arrivals')
    c.add_argument('sinkfile')
    c.add_argument('--t0', type=int, required=True)
    c.add_argument('--restored', action='store_true')
    c.set_defaults(fn=cmd_arrivals)

    c = sub.add_parser('xfer-serve')
    c.add_argument('bind')
    c.add_argument('--timeout', type=float, default=300)
    c.set_defaults(fn=cmd_xfer_serve)

    c = sub.add_parser('xfer-send')
    c.add_argument('dest')
    c.add_argument('bytes')
    c.add_argument('--duration', type=float, default=0)
    c.add_argument('--timeout', type=float, default=120)
    c.set_defaults(fn=cmd_xfer_send)

    c = sub.add_parser('gaps')
    c.add_argument('pinglog')
    c.add_argument('--after', type=float)
    c.set_defaults(fn=cmd_gaps)

    c = sub.add_parser('moves')
    c.add_argument('capture')
    c.add_argument('--server', required=True)
    c.add_argument('--pings')
    c.set_defaults(fn=cmd_moves)

    a = p.parse_args()
    return a.fn(a)


if __name__ == '__main__':
    sys.exit(main())
