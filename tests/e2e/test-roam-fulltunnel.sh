#!/usr/bin/env bash
# A full tunnel (Routes = 0.0.0.0/0) on a laptop with two uplinks: link A
# (preferred) goes down, then comes back, then the laptop's address on B
# changes. Every packet to the server must keep leaving by an uplink, never
# by the tunnel itself: the session survives all three with one handshake,
# its path never leaves from a tunnel address, and pings through the
# tunnel resume within a second of each change.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up
roam_configs
conf_set "$RCONF_C" Routes "0.0.0.0/0"
roam_two_uplinks
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"


# The policy that keeps the tunnel's own packets out of it (as wg-quick's).
assert_eq "rule: unmarked packets to rove's table" 1 \
	"$(ip -n "$RNS_C" rule show | grep -c 'not from all fwmark 0x72[0-9a-f]* lookup ')"
assert_eq "rule: main without its default route first" 1 \
	"$(ip -n "$RNS_C" rule show | grep -c 'lookup main suppress_prefixlength 0')"
assert_eq "the main table keeps no tunnel default route" 0 \
	"$(ip -n "$RNS_C" route show default dev rove0 | wc -l)"
# The tunnel carries everything: the LAN host answers through it.
assert "ping to the LAN host through the full tunnel" \
	nsx "$RNS_C" ping -c 2 -W 2 "$LAN"

# change NAME EXPECTED_LOCAL COMMANDS...: the commands in the middle of a
# 6 s ping through the tunnel; then the path must leave from
# EXPECTED_LOCAL, and pings must have resumed within 1 s.
change() {
	local name=$1 want=$2 gaps t0
	shift 2
	ping_bg "ping-$name" 6 "$LAN"
	local ping_pid=$PING_PID
	sleep 2
	t0=$(now_s)
	"$@" || die "$name: the change failed"
	log "$name: changed at $t0"
	wait_exit "$ping_pid" 20
	gaps=$(tool gaps "$WORK/ping-$name.log" --after "$t0")
	log "$name: ping $gaps"
	log "$name: path from $(local_ip), migrations $(cget migrations)," \
		"validations $(cget path_validations) (failed $(cget path_validation_failures))"
	assert_cmp "$name: first reply after the change (ms)" \
		"$(jf "$gaps" first_after_ms)" -le 1000
	assert_cmp "$name: longest ping gap (ms)" "$(jf "$gaps" max_gap_ms)" -le 1000
	if wait_for 5 "the client's path to leave from $want" client_local_is "$want"; then
		pass "$name: the path leaves from $want"
	else
		failc "$name: the path leaves from $(local_ip), not $want"
	fi
	assert_eq "$name: client state" established "$(cget state)"
	assert_eq "$name: client's handshakes" 1 "$(cget handshakes)"
	assert_eq "$name: roved's handshakes" 1 "$(sgetp handshakes)"
}

a_down() { ip -n "$RNS_C" link set ca down; }
a_up() {
	ip -n "$RNS_C" link set ca up &&
		ip -n "$RNS_C" route replace default via "$R_A" dev ca metric 100
}
C_B2=198.18.11.3
b_renumbered() {
	ip -n "$RNS_C" link set ca down &&
		ip -n "$RNS_C" addr add "$C_B2/24" dev cb &&
		ip -n "$RNS_C" addr del "$C_B/24" dev cb &&
		ip -n "$RNS_C" route replace default via "$R_B" dev cb metric 200
}

change link-a-down "$C_B" a_down
change link-a-up "$C_A" a_up
change b-renumbered "$C_B2" b_renumbered

roam_stop_all
# No rule or route of rove's may outlive it.
assert_eq "policy rules left after rove exits" 0 \
	"$(ip -n "$RNS_C" rule show | grep -c 'fwmark\|suppress_prefixlength')"
roam_finish
