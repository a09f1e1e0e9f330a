# shellcheck shell=bash
# Transport = auto against a UDP policer, for test-throttle.sh and
# bench/throttle.sh: the policer at the router (the switch's bridge of
# lib.sh's topology), bulk transfers through the tunnel with iperf3 and
# their rates. Sourced after lib.sh, with the topology up.
#
#   police on|off [KBYTES]   roved's UDP port policed each way to KBYTES/s
#                            (default 125: 1 Mbit/s); TCP untouched. At
#                            the switch's bridge, or with POLICE_NS set at
#                            that router (lib-path.sh's: its rc and rs)
#   iperf_server, iperf_bg NAME SECONDS ARGS...
#                            iperf3 from the laptop to IPERF_HOST in
#                            IPERF_NS (default: the LAN host) in the
#                            background, 1 s intervals, JSON in
#                            $WORK/NAME.json; iperf_wait NAME waits for it
#   mbits NAME FROM TO       the mean Mbit/s of its intervals in [FROM, TO] s
#   lap PATH                 a value of the laptop's first peer in status
#   transport_is quic|tcp
#   now, elapsed T0 T1, ge A B
now() { date +%s.%N; }
elapsed() { "$PY" -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }
lap() { sget "$NS_LAP" "$LAP_SOCK" "peers[0].$1"; }
transport_is() { [ "$(lap transport 2>/dev/null)" = "$1" ]; }

IPERF_NS=${IPERF_NS:-$NS_LAN}
IPERF_HOST=${IPERF_HOST:-$LAN_HOST}

police() {
	local kbytes=${2:-125} over
	if [ -n "${POLICE_NS:-}" ]; then
		router_police "$@"
		return
	fi
	over="limit rate over $kbytes kbytes/second burst 16 kbytes drop"
	forward_rules "$NS_SW" bridge rove_police "$1" \
		"ip daddr $SRV_OUTER udp dport 4433 $over" \
		"ip saddr $SRV_OUTER udp sport 4433 $over" || die "cannot set the policer $1"
}

# The same at lib-path.sh's router, on the packets' way in from either
# end (the delay relay hands them to the kernel a second time).
router_police() {
	local kbytes=${2:-125} over
	over="limit rate over $kbytes kbytes/second burst 16 kbytes drop"
	forward_rules "$POLICE_NS" inet rove_police "$1" \
		"iifname \"rc\" udp dport 4433 $over" \
		"iifname \"rs\" udp sport 4433 $over" || die "cannot set the policer $1"
}

iperf_listening() { nsx "$IPERF_NS" ss -Hltn 'sport = :5201' | grep -q 5201; }
# iperf_server: iperf3's server for every iperf_bg.
iperf_server() {
	bg iperf3-server "$IPERF_NS" iperf3 -s -B "$IPERF_HOST" -p 5201
	wait_for 10 "iperf3 listening on the LAN host" iperf_listening ||
		die "iperf3 server does not start"
}

# iperf_bg NAME SECONDS ARGS...: iperf3 through the tunnel, in the
# background, its JSON in $WORK/NAME.json; iperf_wait waits for it.
iperf_bg() {
	local name=$1 secs=$2
	shift 2
	ip netns exec "$NS_LAP" timeout $((secs + 20)) iperf3 -c "$IPERF_HOST" \
		-p 5201 -t "$secs" -i 1 -J "$@" >"$WORK/$name.json" 2>"$WORK/$name.err" &
	IPERF_PID=$!
	E2E_PIDS+=("$IPERF_PID")
}
iperf_wait() {
	local rc=0
	wait "$IPERF_PID" || rc=$?
	forget_pid "$IPERF_PID"
	[ "$rc" -eq 0 ] || fail "iperf3 exited with $rc: $(tail -3 "$WORK/$1.err")"
}
# mbits NAME FROM TO: the mean rate (Mbit/s) of the 1 s intervals that
# lie within [FROM, TO] s of the transfer's start.
mbits() {
	"$PY" - "$WORK/$1.json" "$2" "$3" <<-'PY'
	import json, sys
	d = json.load(open(sys.argv[1]))
	lo, hi = float(sys.argv[2]), float(sys.argv[3])
	v = [i["sum"]["bits_per_second"] for i in d["intervals"]
	     if i["sum"]["start"] >= lo - 0.01 and i["sum"]["end"] <= hi + 0.05]
	print("%.2f" % (sum(v) / len(v) / 1e6 if v else 0))
	PY
}
ge() { "$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)" "$1" "$2"; }


# route_change add|del: a route comes or goes on the laptop (as when a
# network comes back), so that rove on TCP probes QUIC at once.
route_change() { ip -n "$NS_LAP" route "$1" 198.18.99.0/24 dev eth0; }
# nudge: a route change; waits for the session on QUIC (on a throttled
# session, the rate probe's 3-5 s first).
nudge() {
	route_change add
	wait_for 10 "the session back on QUIC" transport_is quic ||
		fail "the session did not return to QUIC after a route change"
	route_change del
}
