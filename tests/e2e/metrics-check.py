#!/usr/bin/python3
"""Compare a Prometheus scrape of rove or roved with its status JSON.

  metrics-check.py METRICS_FILE STATUS_JSON_FILE

Parses METRICS_FILE with prometheus_client's own parser (so the output
must be valid exposition text) and checks, for every peer in the status,
that the per-peer counters equal the status figures exactly, and that the
process figures are present. Prints one line per check; exits 1 if any
failed.
"""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

metrics_text = open(sys.argv[1]).read()
status = json.load(open(sys.argv[2]))

samples = {}
for fam in text_string_to_metric_families(metrics_text):
    for s in fam.samples:
        samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

failed = 0


def check(what, got, want):
    global failed
    if got == want:
        print("ok: %s = %r" % (what, got))
    else:
        print("FAIL: %s: got %r, want %r" % (what, got, want))
        failed += 1


def peer_value(name, peer, **labels):
    key = (name, tuple(sorted(dict(peer=peer, **labels).items())))
    return samples.get(key)


check("role", samples.get(("rove_info", (("role", status["role"]),))), 1.0)
for reason, n in status["drops"].items():
    check("drops %s" % reason,
          samples.get(("rove_drops_total", (("reason", reason),))), float(n))
for result in ("applied", "refused"):
    check("reloads %s" % result,
          samples.get(("rove_reloads_total", (("result", result),))),
          float(status["reloads"][result]))
if "generation" in status["reloads"]:
    check("reload generation", samples.get(("rove_reload_generation", ())),
          float(status["reloads"]["generation"]))
for w in status["reloads"].get("workers", []):
    check("worker %d's reload generation" % w["worker"],
          samples.get(("rove_worker_reload_generation",
                       (("worker", str(w["worker"])),))),
          float(w["generation"]))
pairs = [
    ("rove_peer_rx_bytes_total", "rx_bytes"),
    ("rove_peer_tx_bytes_total", "tx_bytes"),
    ("rove_peer_rx_packets_total", "rx_packets"),
    ("rove_peer_tx_packets_total", "tx_packets"),
    ("rove_peer_handshakes_total", "handshakes"),
    ("rove_peer_migrations_total", "migrations"),
    ("rove_peer_port_moves_total", "port_moves"),
    ("rove_peer_rebinds_total", "rebinds"),
    ("rove_peer_datagrams_lost_total", "datagrams_lost"),
]
for p in status["peers"]:
    name = p["name"]
    check("%s connected" % name, peer_value("rove_peer_connected", name),
          1.0 if p["state"] == "established" else 0.0)
    for metric, field in pairs:
        check("%s %s" % (name, field), peer_value(metric, name), float(p[field]))
    for reason, n in p["drops"].items():
        check("%s drops %s" % (name, reason),
              peer_value("rove_peer_drops_total", name, reason=reason), float(n))
    for t in ("quic", "tcp"):
        check("%s transport %s" % (name, t),
              peer_value("rove_peer_transport", name, transport=t),
              1.0 if p["transport"] == t else 0.0)
    # The session's TLS group: one sample, value 1, while there is one.
    kex = [(dict(k[1]), v) for k, v in samples.items()
           if k[0] == "rove_peer_key_exchange" and dict(k[1])["peer"] == name]
    want = [] if p.get("key_exchange") is None else [
        ({"peer": name, "group": p["key_exchange"],
          "pq": "yes" if "MLKEM" in p["key_exchange"] else "no"}, 1.0)]
    check("%s key_exchange" % name, kex, want)
    if "tcp_fallbacks" in p:
        check("%s tcp_fallbacks" % name,
              peer_value("rove_peer_tcp_fallbacks_total", name),
              float(p["tcp_fallbacks"]))
        check("%s quic_returns" % name,
              peer_value("rove_peer_quic_returns_total", name),
              float(p["quic_returns"]))
        check("%s throttle_moves" % name,
              peer_value("rove_peer_throttle_moves_total", name),
              float(p["throttle_moves"]))
        check("%s throttle_probes_failed" % name,
              peer_value("rove_peer_throttle_probes_failed_total", name),
              float(p["throttle_probes_failed"]))
    check("%s zero_rtt accepted" % name,
          peer_value("rove_peer_zero_rtt_accepted_total", name),
          float(p["zero_rtt"]["accepted"]))
    if "forward_counters" in p:
        check("%s forwards completed" % name,
              peer_value("rove_peer_forwards_total", name, outcome="completed"),
              float(p["forward_counters"]["completed"]))
        for c in ("resumed", "resume_lost"):
            check("%s forwards %s" % (name, c),
                  peer_value("rove_peer_forwards_%s_total" % c, name),
                  float(p["forward_counters"][c]))
        check("%s forwards open" % name,
              peer_value("rove_peer_forwards_open", name), float(len(p["forwards"])))
    if "udp_counters" in p:
        u = p["udp_counters"]
        for c in ("opened", "refused", "expired"):
            check("%s udp flows %s" % (name, c),
                  peer_value("rove_peer_udp_flows_%s_total" % c, name), float(u[c]))
        for k, n in u.items():
            if k.startswith("dropped_"):
                check("%s udp %s" % (name, k),
                      peer_value("rove_peer_udp_dropped_total", name,
                                 cause=k[len("dropped_"):]), float(n))
        check("%s udp flows open" % name,
              peer_value("rove_peer_udp_flows_open", name), float(len(p["udp_flows"])))
for proc in ("process_cpu_seconds_total", "process_resident_memory_bytes",
             "process_open_fds"):
    v = samples.get((proc, ()))
    check("%s present and positive" % proc, v is not None and v > 0, True)
sys.exit(1 if failed else 0)
