#!/usr/bin/env bash
# Loss recovery: the hosts' TCP does not pay for the path's random loss.
# The router's delay relay loses 1% of packets each way at random, 44 ms
# round trip. The laptop sends 10 s of TCP to roved's tunnel address with
# Cubic (iperf3 -C cubic), at most 40 Mbit/s so that the path itself never
# congests: every loss the inner TCP could see is the relay's. Counted in
# the laptop's namespace (nstat: TcpOutSegs, TcpRetransSegs), per run:
#  - LossRecovery = auto at both ends: repairs go out, roved rebuilds
#    packets, and the inner TCP retransmits under 0.2% of what it sends;
#  - LossRecovery = off at the laptop (roved still auto): nothing repaired
#    on the way up, the inner TCP retransmits about the 1% the relay loses
#    (at least 0.5%); roved's repairs still reach the laptop and are
#    decoded, so the two settings interoperate.
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
command -v iperf3 >/dev/null || die "iperf3 is not installed (scripts/deps.sh installs it)"
command -v nstat >/dev/null || die "nstat is not installed (iproute2)"

SECS=10
RATE=40M

roam_topo_up 22 1
roam_configs

# tcp_counters: "OutSegs RetransSegs" of the laptop's namespace now.
tcp_counters() {
	nsx "$RNS_C" nstat -asz TcpOutSegs TcpRetransSegs |
		awk '$1 == "TcpOutSegs" { o = $2 } $1 == "TcpRetransSegs" { r = $2 }
			END { print o + 0, r + 0 }'
}

# upload TAG PORT: one run; sets OUT, RETRANS and MBIT.
upload() {
	local tag=$1 port=$2 before after srv rc
	bg "iperf3-srv-$tag" "$RNS_S" iperf3 -s -1 -B "$S_TUN" -p "$port"
	srv=$BG_PID
	wait_for 10 "iperf3 server on $S_TUN:$port" tcp_port_open "$RNS_S" "$port" ||
		die "iperf3 server does not listen"
	before=$(tcp_counters)
	timeout -k 5 $((SECS + 15)) ip netns exec "$RNS_C" iperf3 -c "$S_TUN" \
		-p "$port" -C cubic -b "$RATE" -t "$SECS" -J \
		>"$WORK/iperf3-$tag.json" 2>"$WORK/iperf3-$tag.err"
	rc=$?
	after=$(tcp_counters)
	wait_exit "$srv" 5 >/dev/null
	[ "$rc" -eq 0 ] || failc "$tag: iperf3 exited with status $rc"
	read -r o0 r0 <<<"$before"
	read -r o1 r1 <<<"$after"
	OUT=$((o1 - o0))
	RETRANS=$((r1 - r0))
	MBIT=$(jget end.sum_received.bits_per_second <"$WORK/iperf3-$tag.json" 2>/dev/null |
		awk '{ printf "%.1f", $1 / 1e6 }')
	log "$tag: $MBIT Mbit/s, $OUT segments sent, $RETRANS retransmitted" \
		"($(awk -v r="$RETRANS" -v o="$OUT" 'BEGIN { printf "%.3f", o ? 100 * r / o : 0 }')%)"
}

# per_mille_x10 R O: R/O in units of 0.01%, rounded down.
per_10k() { awk -v r="$1" -v o="$2" 'BEGIN { printf "%d", o ? 10000 * r / o : 0 }'; }

roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"

upload "auto" 5301
assert_cmp "auto: segments sent" "$OUT" -ge 5000
assert_cmp "auto: retransmitted segments per 10000 sent" "$(per_10k "$RETRANS" "$OUT")" -lt 20
assert_cmp "auto: the laptop's repair datagrams" "$(cget loss_recovery.repairs_sent)" -gt 0
assert_cmp "auto: packets roved rebuilt" "$(sgetp loss_recovery.rebuilt)" -gt 0
expect_eq "auto: the laptop repairs (sending)" true "$(cget loss_recovery.sending)"
log "auto: laptop $(status_try "$RNS_C" "$LAP_SOCK" | jget 'peers[0].loss_recovery')"
log "auto: roved $(status_try "$RNS_S" "$ROVED_SOCK" | jget 'peers[name=laptop].loss_recovery')"

# The laptop without repairs of its own. (No check that roved hears the
# close: the one CONNECTION_CLOSE crosses the same 1% loss.)
roam_stop_all
conf_set "$RCONF_C" LossRecovery off
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up with LossRecovery = off"

upload "off" 5302
assert_cmp "off: segments sent" "$OUT" -ge 1000
assert_cmp "off: retransmitted segments per 10000 sent" "$(per_10k "$RETRANS" "$OUT")" -ge 50
expect_eq "off: the laptop repairs (sending)" false "$(cget loss_recovery.sending)"
expect_eq "off: the laptop's repair datagrams" 0 "$(cget loss_recovery.repairs_sent)"
expect_eq "off: packets roved rebuilt" 0 "$(sgetp loss_recovery.rebuilt)"
# roved's repairs of its ACKs still reach the laptop and are decoded.
assert_cmp "off: group packets the laptop received from roved" \
	"$(cget loss_recovery.received)" -gt 0

roam_stop_all
roam_finish
