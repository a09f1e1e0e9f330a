#!/usr/bin/env bash
# Workers = 2: roved runs as two processes sharing its UDP port, each
# owning the sessions whose connection IDs name it (the kernel steers each
# datagram by that octet) and with a TUN device of its own, into which the
# kernel routes the addresses of the peers it holds. tests/load/rove-load
# connects 200 of 250 configured peers; every one of them sends ICMP
# echoes through the tunnel to roved's address and must get its own
# answers back (each answer leaves by the peer's route, so one steered to
# the wrong worker would be lost); both workers hold sessions, every peer
# is established in exactly one, and neither dropped a packet for want of
# a session or route. Then roved restarts and all 200 come back with
# 0-RTT, on whichever worker their new connection lands (a ticket issued
# by one worker opens on the other once).
# Topology: tests/e2e/load-lib.sh.
. "$(dirname "$0")/load-lib.sh"
load_init "$@"
N=200
EXTRA=50
load_topo_up
load_gen $((N + EXTRA))
sed -i 's/^\[Server\]$/[Server]\nWorkers = 2/' "$LOAD_CONF"
# The tunnel is IPv4 here: no IPv6 on the TUN devices, whose link-local
# chatter (router solicitations, MLD) would count as no_route drops.
nsx "$NS_SRV" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
load_start_roved
SOCK0=$ROVED_SOCK
SOCK1=$ROVED_SOCK.1
wait_for 10 "worker 1's control socket" status_ok "$NS_SRV" "$SOCK1" ||
	die "worker 1 did not come up"
expect_eq "TUN devices" "rove0 rove0w1" \
	"$(ip -n "$NS_SRV" -o link show type tun | awk -F': ' '{print $2}' | sort | paste -sd' ')"

load_run load "$N" -C 64 -c 60 -i 1 -m "$N" -t "$LOAD_TUN" -w 2 -T 3 -r 60 -H 60
load_wait_line load 90 "waiting for a server restart" ||
	fail "rove-load did not reach its restart phase"
expect_eq "sessions connected" "$N" "$(load_result load connected)"
expect_eq "sessions answered through the tunnel" "$N" "$(load_result load echo_sessions)"
log "echoes: $(grep '^RESULT echo' "$WORK/load.log")"

# worker_view SOCKET W: "established DROPS" of worker W as SOCKET tells:
# the peers it says worker W holds (listed in a file), and the packets
# it dropped. Worker 0's socket answers for the whole server: every
# established peer, with the worker holding it, and all drops.
worker_view() {
	status "$NS_SRV" "$1" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
w = int(sys.argv[2])
est = [p["name"] for p in d["peers"]
       if p["state"] == "established" and p["worker"] == w]
print(len(est), sum(d["drops"].values()))
open(sys.argv[1], "w").write("\n".join(sorted(est)) + "\n")' "$2" "$3"
}
# all_view: "established configured" as worker 0 tells, and its
# peer_states.
all_view() {
	status "$NS_SRV" "$SOCK0" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
est = sum(p["state"] == "established" for p in d["peers"])
s = d["peer_states"]
print(est, len(d["peers"]), s["established"], s["closed"])'
}
read -r est0 drops0 <<<"$(worker_view "$SOCK0" "$WORK/est-0" 0)"
read -r est1 drops1 <<<"$(worker_view "$SOCK1" "$WORK/est-1" 1)"
log "worker 0 holds $est0 peers, worker 1 $est1"
check "worker 0 holds sessions" [ "$est0" -gt 0 ]
check "worker 1 holds sessions" [ "$est1" -gt 0 ]
expect_eq "peers established, both workers together" "$N" "$((est0 + est1))"
expect_eq "peers established in both workers" "" \
	"$(comm -12 "$WORK/est-0" "$WORK/est-1" | grep -v '^$')"
expect_eq "packets dropped (worker 1, all)" "0 0" "$drops1 $drops0"
# Worker 0 speaks for both: each peer once, established, with the
# worker that holds it as that worker says (board.h).
expect_eq "worker 0's view: established, listed, peer_states established, closed" \
	"$N $((N + EXTRA)) $N $EXTRA" "$(all_view)"
worker_view "$SOCK0" "$WORK/est-0-says-1" 1 >/dev/null
expect_eq "worker 0's list of worker 1's peers" "" \
	"$(diff "$WORK/est-0-says-1" "$WORK/est-1")"
# Every echo answered but those still in flight at the end (2 a session).
expect_eq "echoes lost" 0 "$(load_result load echo_lost)"
check "echoes unanswered at most those in flight" \
	[ $(($(load_result load echo_sent) - $(load_result load echo_answered))) -le $((2 * N)) ]

load_stop_roved
mv "$WORK/roved.log" "$WORK/roved-1.log"
load_start_roved
load_wait_line load 60 "holding the sessions" ||
	fail "rove-load did not finish its restart phase"
expect_eq "sessions back after the restart" "$N" "$(load_result load back)"
expect_eq "0-RTT accepted after the restart" "$N" "$(load_result load zero_rtt_accepted)"
expect_eq "0-RTT rejected after the restart" 0 "$(load_result load zero_rtt_rejected)"
wait_for 10 "worker 1's control socket" status_ok "$NS_SRV" "$SOCK1" ||
	fail "worker 1 did not come back"
read -r est0 drops0 <<<"$(worker_view "$SOCK0" "$WORK/est-0" 0)"
read -r est1 drops1 <<<"$(worker_view "$SOCK1" "$WORK/est-1" 1)"
expect_eq "peers established after the restart" "$N" "$((est0 + est1))"
expect_eq "worker 0's view after the restart" "$N $((N + EXTRA)) $N $EXTRA" \
	"$(all_view)"
stop_pid "$LOAD_PID"
forget_pid "$LOAD_PID"

# Forwards through both workers: 40 sessions each keep a forward to a TCP
# sink beside roved full for 2 s. Each worker takes what its peers send
# (acknowledged) and passes it on: the sink gets all of it but what the
# relays still hold (one ForwardBuffer each, at most), and perhaps what
# was in flight, unacknowledged, when the count was taken (rove-load keeps
# at most 1 MiB a forward unacknowledged).
load_sink_start
load_run fwd 40 -C 40 -c 30 -i 1 -m 40 -F "$LOAD_SINK:$LOAD_SINK_PORT" -T 2
wait_exit_load() { ! kill -0 "$LOAD_PID" 2>/dev/null; }
wait_for 60 "rove-load's forwards" wait_exit_load || fail "rove-load did not finish"
forget_pid "$LOAD_PID"
log "$(grep '^forwards' "$WORK/fwd.log")"
expect_eq "sessions whose forward moved data" 40 "$(load_result fwd fwd_sessions)"
expect_eq "forwards failed" 0 "$(load_result fwd fwd_failed)"
wait_for 10 "the sink's 40 connections" \
	sh -c "[ \$(wc -l <'$WORK/sink.json' 2>/dev/null || echo 0) -ge 40 ]" ||
	fail "the sink did not see 40 connections end"
read -r conns rx <<<"$(load_sink_totals)"
taken=$(load_result fwd fwd_bytes)
buffer=$(nsx "$NS_SRV" "$BUILD/roved" -T -c "$LOAD_CONF" | sed -n 's/^ForwardBuffer = //p')
log "sink: $conns connections, $rx bytes; roved took $taken"
expect_eq "connections at the sink" 40 "$conns"
sink_matches() {
	[ "$rx" -le $((taken + 40 * 1048576)) ] &&
		[ "$rx" -ge $((taken - 40 * buffer - 40 * 64)) ]
}
check "the sink got what roved took, within a ForwardBuffer less or 1 MiB more each" \
	sink_matches
est_fwd=$(status "$NS_SRV" "$SOCK1" | "$PY" -c '
import json, sys
print(sum(p["state"] == "established" for p in json.load(sys.stdin)["peers"]))')
check "worker 1 served some of the forwarding sessions" [ "$est_fwd" -gt 0 ]

# Worker 0 stops worker 1 with it.
pid1=$(ip netns pids "$NS_SRV" | grep -vx "$ROVED_PID" | head -n1)
load_stop_roved
check "worker 1 exited with worker 0" wait_for 5 "worker 1 to exit" \
	sh -c "! kill -0 $pid1 2>/dev/null"
e2e_finish
