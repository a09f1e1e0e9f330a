#!/usr/bin/env bash
# Transport = auto against a UDP policer: a router that lets roved's UDP
# through at 1 Mbit/s each way (nftables "limit rate over ... drop") while
# TCP runs free. For each path (clean veth through the switch namespace's
# bridge, and 50 ms of round trip by netem on its ports) and each inner
# congestion controller (the laptop's iperf3 socket: Cubic, BBR):
#   clean     iperf3 for 10 s on QUIC, no policer: its rate, and the moves
#             to TCP it caused (the target: none)
#   TCP       the same with UDP dropped, the session on TLS over TCP: the
#             reference rate ("what Transport = tcp reaches")
#   policed   the policer appears as a 20 s transfer starts: the time to
#             the move to TCP ("detect"), the rate in the first 2 s (QUIC
#             policed), and from 10 s to 20 s as a share of the reference
#             (the target: 0.8 or more)
# Then one steady policer under a transfer that runs BENCH_STABLE_SECONDS
# (default 180) at 50 ms and Cubic: every transport switch with its time,
# the most in any 60 s, and, once the policer goes (no network change to
# help), how long until the session is back on QUIC.
#
# usage: bench/throttle.sh BUILD_DIR
. "$(dirname "$0")/../tests/e2e/lib.sh"
TEST_NAME=bench-throttle
e2e_init "$1"
command -v iperf3 >/dev/null || die "iperf3 is not installed (scripts/deps.sh installs it)"
e2e_transport auto
topo_up
. "$E2E_DIR/throttle-lib.sh"
STABLE=${BENCH_STABLE_SECONDS:-180}
RESULTS=$WORK/results
for cc in cubic bbr; do
	grep -qw "$cc" /proc/sys/net/ipv4/tcp_allowed_congestion_control ||
		die "$cc is not allowed: sysctl -w net.ipv4.tcp_allowed_congestion_control=\"reno bbr cubic\""
done
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
iperf_server

# delay MS: MS/2 each way on the switch's ports to the laptop and roved.
delay() {
	local p
	for p in p-lap p-srv; do
		nsx "$NS_SW" tc qdisc replace dev "$p" root netem delay "$(($1 / 2))ms" limit 100000
	done
}

for rtt in 0 50; do
	delay "$rtt"
	for cc in cubic bbr; do
		row="$rtt $cc"
		moves0=$(lap tcp_fallbacks)
		iperf_bg "clean-$rtt-$cc" 10 -C "$cc"
		iperf_wait "clean-$rtt-$cc"
		clean=$(mbits "clean-$rtt-$cc" 2 10)
		clean_moves=$(($(lap tcp_fallbacks) - moves0))

		udp_block on
		wait_for 10 "the session on TCP" transport_is tcp || die "UDP blocked: no move to TCP"
		iperf_bg "tcp-$rtt-$cc" 10 -C "$cc"
		iperf_wait "tcp-$rtt-$cc"
		ref=$(mbits "tcp-$rtt-$cc" 2 10)
		udp_block off
		nudge

		police on
		t0=$(now)
		iperf_bg "policed-$rtt-$cc" 20 -C "$cc"
		if wait_for 20 "the session on TCP" transport_is tcp; then
			detect=$(elapsed "$t0" "$(now)")
		else
			detect=never
		fi
		iperf_wait "policed-$rtt-$cc"
		police off
		nudge
		quic=$(mbits "policed-$rtt-$cc" 0 2)
		late=$(mbits "policed-$rtt-$cc" 10 20)
		share=$("$PY" -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$late" "$ref")
		echo "$row $clean $clean_moves $ref $detect $quic $late $share" >>"$RESULTS"
		log "$row: clean $clean Mbit/s ($clean_moves moves), TCP $ref, policed: on TCP after $detect s, $quic then $late Mbit/s ($share)"
	done
done

# The steady policer.
delay 50
police on
t0=$(now)
iperf_bg stable "$((STABLE + 5))" -C cubic
last=quic
switches=()
for _ in $(seq 1 $((STABLE * 4))); do
	cur=$(lap transport 2>/dev/null || echo "$last")
	if [ "$cur" != "$last" ]; then
		switches+=("$(elapsed "$t0" "$(now)")")
		log "steady policer: to $cur at ${switches[-1]} s"
		last=$cur
	fi
	sleep 0.25
done
police off
t_off=$(now)
if wait_for 300 "the session back on QUIC" transport_is quic; then
	back=$(elapsed "$t_off" "$(now)")
else
	back=never
fi
iperf_wait stable

printf '\nrove (Transport = auto) under a 1 Mbit/s UDP policer, TCP free; iperf3 through the tunnel\n\n'
printf '%-4s %-6s %9s %6s %9s %8s %10s %10s %6s\n' RTT inner clean moves "TCP ref" detect "policed" "10-20 s" share
printf '%-4s %-6s %9s %6s %9s %8s %10s %10s %6s\n' ms CC Mbit/s "" Mbit/s s "0-2 s" Mbit/s ""
while read -r r c cl mv rf dt q lt sh; do
	printf '%-4s %-6s %9s %6s %9s %8s %10s %10s %6s\n' "$r" "$c" "$cl" "$mv" "$rf" "$dt" "$q" "$lt" "$sh"
done <"$RESULTS"
"$PY" - "$STABLE" "$back" "${switches[@]}" <<'PY'
import sys
stable, back, sw = float(sys.argv[1]), sys.argv[2], [float(x) for x in sys.argv[3:]]
most = max((sum(1 for y in sw if x <= y < x + 60) for x in sw), default=0)
print()
print("steady policer, %d s at 50 ms, Cubic: %d switches (at %s s), %.2f a minute, at most %d in any 60 s"
      % (stable, len(sw), ", ".join("%.1f" % x for x in sw) or "-", len(sw) / (stable / 60), most))
print("policer removed: back on QUIC after %s s (no network change; at most the hold then running)" % back)
PY
e2e_finish
