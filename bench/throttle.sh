#!/usr/bin/env bash
# Transport = auto against a UDP policer: a router that lets roved's UDP
# through at 1 Mbit/s each way (nftables "limit rate over ... drop") while
# TCP runs free. The path is bench/lib-path.sh's router with the delay
# relay (tests/e2e/delay-relay). For each path (no delay; 50 ms of round
# trip with a 100 Mbit/s bottleneck; 50 ms without one) and each inner
# congestion controller (the laptop's iperf3 socket: Cubic, BBR), iperf3
# through the tunnel to roved's end of it:
#   clean     10 s on QUIC, no policer: its rate, and the moves to TCP it
#             caused (the target: none)
#   TCP       the same with UDP dropped, the session on TLS over TCP: the
#             reference rate ("what Transport = tcp reaches")
#   policed   the policer appears as a 20 s transfer starts: the time to
#             the move to TCP ("detect"), the rate in the first 2 s (QUIC
#             policed), and from 10 s to 20 s as a share of the reference
#             (the target: 0.8 or more)
# Then one steady policer under a transfer that runs BENCH_STABLE_SECONDS
# (default 180) on BENCH_STABLE_PATH (default 50:100, 50 ms and 100
# Mbit/s) with Cubic, the transfer running on
# until the session is back on QUIC: every transport switch with
# its time, the most in any 60 s, the rate probes at the holds' ends that
# found the policer (each kept the session on TCP: a switch pair spared),
# and, once the policer goes (no network change to help), how long until
# the session is back on QUIC.
#
# usage: bench/throttle.sh BUILD_DIR
#   BENCH_PATHS (default "0: 50:100 50:"): the paths of the table, as
#   RTT_MS:[MBIT]; empty for the steady policer alone.
. "$(dirname "$0")/../tests/e2e/roam-lib.sh"
. "$(dirname "$0")/lib-path.sh"
TEST_NAME=bench-throttle
e2e_init "$1"
command -v iperf3 >/dev/null || die "iperf3 is not installed (scripts/deps.sh installs it)"
for cc in cubic bbr; do
	grep -qw "$cc" /proc/sys/net/ipv4/tcp_allowed_congestion_control ||
		die "$cc is not allowed: sysctl -w net.ipv4.tcp_allowed_congestion_control=\"reno bbr cubic\""
done
roam_relay_bin
NS_R=rove-$$-tr
router_topo_up "$NS_R"
conf_set "$WORK/configs/roved.conf" Listen "$S_ADDR:4433"
conf_set "$WORK/configs/rove.conf" Server "$S_ADDR:4433"
e2e_transport auto "$S_ADDR"
POLICE_NS=$NS_R IPERF_NS=$NS_S IPERF_HOST=$SRV_TUN4
. "$E2E_DIR/throttle-lib.sh"
STABLE=${BENCH_STABLE_SECONDS:-180}
STABLE_PATH=${BENCH_STABLE_PATH:-50:100}
RESULTS=$WORK/results
: >"$RESULTS"

# path MS [MBIT]: the delay relay with MS of round trip (MS/2 each way)
# and, with MBIT, a bottleneck of that rate each way; the old one goes.
RELAY_PID=
path() {
	local args=(-t 1800 -q 65536)
	if [ -n "$RELAY_PID" ]; then
		stop_pid "$RELAY_PID"
		forget_pid "$RELAY_PID"
	fi
	[ -n "${2:-}" ] && args+=(-r "$2")
	bg "relay-$1-${2:-0}" "$NS_R" "$RELAY" "${args[@]}" dA dB "$(($1 / 2))"
	RELAY_PID=$BG_PID
	wait_for 10 "the delay relay" ready_in "$WORK/relay-$1-${2:-0}.log" ||
		die "delay-relay did not start"
	relay_routes "$NS_R" || die "no routes into the relay"
	wait_for 10 "the client reaching the server through the relay" \
		quiet_ping "$NS_C" "$S_ADDR" || die "no way through the relay"
}
# UDP dropped at the router (the reference runs on TLS over TCP).
router_udp_block() {
	FORWARD_PRIORITY=-20 forward_rules "$NS_R" inet rove_block "$1" \
		"udp dport 4433 drop" "udp sport 4433 drop" || die "cannot block UDP ($1)"
}

# fresh_client: rove started again, so that each path's figures come
# from a connection that knew no other path, and the steady policer's
# from a client whose holds start at the shortest.
fresh_client() {
	if [ -n "${LAP_PID:-}" ]; then
		stop_pid "$LAP_PID"
		forget_pid "$LAP_PID"
	fi
	start_client laptop
	wait_established laptop || die "laptop's tunnel does not come up"
}

path 0
start_roved
iperf_server

for link in ${BENCH_PATHS-0: 50:100 50:}; do
	rtt=${link%%:*}
	rate=${link#*:}
	path "$rtt" "${rate%mbit}"
	fresh_client
	for cc in cubic bbr; do
		label=${rate:+${rate}Mbit}
		row="$rtt ${label:-free} $cc"
		moves0=$(lap tcp_fallbacks)
		iperf_bg "clean-$rtt-$cc" 10 -C "$cc"
		iperf_wait "clean-$rtt-$cc"
		clean=$(mbits "clean-$rtt-$cc" 2 10)
		clean_moves=$(($(lap tcp_fallbacks) - moves0))

		# An idle path that stops passing UDP is noticed only once a
		# packet goes unanswered: a ping while it does.
		bg "ping-block-$rtt-$cc" "$NS_C" ping -n -q -i 0.2 -W 1 -c 50 "$SRV_TUN4"
		ping_pid=$BG_PID
		router_udp_block on
		wait_for 10 "the session on TCP" transport_is tcp || die "UDP blocked: no move to TCP"
		stop_pids "$ping_pid"
		iperf_bg "tcp-$rtt-$cc" 10 -C "$cc"
		iperf_wait "tcp-$rtt-$cc"
		ref=$(mbits "tcp-$rtt-$cc" 2 10)
		router_udp_block off
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
path "${STABLE_PATH%%:*}" "${STABLE_PATH#*:}"
fresh_client
police on
t0=$(now)
iperf_bg stable "$((STABLE + 40))" -C cubic
last=quic
switches=()
end=$(date -d "+$STABLE seconds" +%s)
while [ "$(date +%s)" -lt "$end" ]; do
	cur=$(lap transport 2>/dev/null || echo "$last")
	if [ "$cur" != "$last" ]; then
		switches+=("$(elapsed "$t0" "$(now)")")
		log "steady policer: to $cur at ${switches[-1]} s"
		last=$cur
	fi
	sleep 0.25
done
probes_failed=$(lap throttle_probes_failed)
police off
t_off=$(now)
if wait_for 300 "the session back on QUIC" transport_is quic; then
	back=$(elapsed "$t_off" "$(now)")
else
	back=never
fi
stop_pid "$IPERF_PID" >/dev/null 2>&1 || true
forget_pid "$IPERF_PID"
log "what rove said of its moves under the steady policer:"
grep -E "throttled|TLS over TCP carries|moves to|moves back|QUIC answers|QUIC carried|unacknowledged|no answer" \
	"$WORK/laptop.log" | sed 's/^/    /'

printf '\nrove (Transport = auto) under a 1 Mbit/s UDP policer, TCP free; iperf3 through the tunnel\n\n'
printf '%-4s %-8s %-6s %9s %6s %9s %8s %10s %10s %6s\n' RTT link inner clean moves "TCP ref" detect "policed" "10-20 s" share
printf '%-4s %-8s %-6s %9s %6s %9s %8s %10s %10s %6s\n' ms "" CC Mbit/s "" Mbit/s s "0-2 s" Mbit/s ""
while read -r r l c cl mv rf dt q lt sh; do
	printf '%-4s %-8s %-6s %9s %6s %9s %8s %10s %10s %6s\n' "$r" "$l" "$c" "$cl" "$mv" "$rf" "$dt" "$q" "$lt" "$sh"
done <"$RESULTS"
"$PY" - "$STABLE" "$back" "$probes_failed" "$STABLE_PATH" "${switches[@]}" <<'PY'
import sys
stable, back, probes = float(sys.argv[1]), sys.argv[2], sys.argv[3]
rtt, _, rate = sys.argv[4].partition(":")
sw = [float(x) for x in sys.argv[5:]]
most = max((sum(1 for y in sw if x <= y < x + 60) for x in sw), default=0)
print()
print("steady policer, %d s at %s ms and %s, Cubic: %d switches (at %s s), %.2f a minute, at most %d in any 60 s"
      % (stable, rtt, rate + " Mbit/s" if rate else "no bottleneck", len(sw), ", ".join("%.1f" % x for x in sw) or "-", len(sw) / (stable / 60), most))
print("rate probes that found the policer (the session stayed on TCP): %s" % probes)
print("policer removed: back on QUIC after %s s (no network change; at most the hold then running)" % back)
PY
e2e_finish
