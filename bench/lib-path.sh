# shellcheck shell=bash
# The paths the benchmarks measure over, between namespaces of their own,
# and rove's tunnel across them. Sourced after tests/e2e/lib.sh, whose
# ns_add, veth, nsx, wait_for, stop_pid and die it uses.
#
#   NS_C, NS_S         the client's and the server's namespace: lib.sh's
#                      start_client laptop and start_roved run in these
#   veth_topo_up       NS_C (eth0 $LAP_OUTER/24) and NS_S (eth0
#                      $SRV_OUTER/24) on one veth; dies if no ping crosses
#                      it within 10 s (bench/run.sh, forward.sh, profile.sh)
#   router_topo_up NS_R
#                      NS_C (eth0 $C_ADDR) -- rc, NS_R, rs -- NS_S (eth0
#                      $S_ADDR), both ends routed through NS_R, which
#                      forwards without NAT and sends what comes in on rc
#                      to table 100 and on rs to table 101; until
#                      relay_routes fills those, nothing crosses
#                      (bench/lossy.sh, wan.sh)
#   relay_routes NS_R  tables 100 and 101 into the TUN devices of the
#                      tests/e2e/delay-relay running in NS_R: the client's
#                      packets enter it at dA and leave at dB, the
#                      server's the other way; the routes go with the
#                      devices when the relay stops
#   quiet_ping NS DEST one ping from NS to DEST answered within a second
#   rove_recovery_up auto|off
#                      roved and the laptop's rove with that LossRecovery
#                      (in $WORK/configs' roved.conf and rove.conf),
#                      established, and a ping through the tunnel answered
#   rove_pings         one ping crosses rove's tunnel to roved
#   rove_down          stops roved and the laptop's rove, so that the next
#                      run starts from a fresh tunnel

NS_C=$NS_LAP
NS_S=$NS_SRV
C_ADDR=198.18.40.2
R_C=198.18.40.1
R_S=198.18.41.1
S_ADDR=198.18.41.2

quiet_ping() { nsx "$1" ping -c 1 -W 1 "$2" >/dev/null 2>&1; }

veth_topo_up() {
	ns_add "$NS_S"
	ns_add "$NS_C"
	veth "$NS_C" eth0 "$NS_S" eth0
	ip -n "$NS_S" addr add "$SRV_OUTER/24" dev eth0
	ip -n "$NS_C" addr add "$LAP_OUTER/24" dev eth0
	wait_for 10 "the veth link" quiet_ping "$NS_C" "$SRV_OUTER" ||
		die "the veth link does not come up"
}

router_topo_up() {
	local r=$1 ns
	for ns in "$NS_C" "$r" "$NS_S"; do
		ns_add "$ns"
		# Replies from the relay come in on dA/dB, not on the link their
		# source lies behind.
		nsx "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
	done
	veth "$NS_C" eth0 "$r" rc
	veth "$r" rs "$NS_S" eth0
	ip -n "$NS_C" addr add "$C_ADDR/24" dev eth0
	ip -n "$NS_C" route add default via "$R_C"
	ip -n "$r" addr add "$R_C/24" dev rc
	ip -n "$r" addr add "$R_S/24" dev rs
	ip -n "$NS_S" addr add "$S_ADDR/24" dev eth0
	ip -n "$NS_S" route add default via "$R_S"
	nsx "$r" sysctl -qw net.ipv4.ip_forward=1
	ip -n "$r" rule add iif rc lookup 100 pref 100
	ip -n "$r" rule add iif rs lookup 101 pref 101
}

relay_routes() {
	nsx "$1" sysctl -qw net.ipv4.conf.dA.rp_filter=0 net.ipv4.conf.dB.rp_filter=0
	ip -n "$1" route add default dev dA table 100 &&
		ip -n "$1" route add default dev dB table 101
}

rove_pings() { quiet_ping "$NS_C" "$SRV_TUN4"; }

rove_recovery_up() {
	conf_set "$WORK/configs/roved.conf" LossRecovery "$1"
	conf_set "$WORK/configs/rove.conf" LossRecovery "$1"
	start_roved
	start_client laptop
	wait_established laptop && wait_for 15 "a ping through rove" rove_pings
}

rove_down() {
	stop_pids "${LAP_PID:-}" "${ROVED_PID:-}"
	LAP_PID='' ROVED_PID=''
}
