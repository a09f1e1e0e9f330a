#!/usr/bin/env bash
# Address change: the client's address moves (to the other link, then to a
# new address on the same link), the old address is deleted and the default
# route moves. rove must migrate the connection (same handshake) with a ping
# outage of at most 500 ms, and a forward transfer running across the change
# must complete intact.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up
roam_configs
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"
tool_bg xfer-serve "$RNS_L" xfer-serve "$LAN:$FWD_PORT" --timeout 200
wait_for 10 "the transfer sink" ready_in "$WORK/xfer-serve.log" || die "xfer-serve did not start"
wait_for 10 "rove's LocalForward" tcp_port_open "$RNS_C" "$FWD_PORT" ||
	die "rove does not listen on 127.0.0.1:$FWD_PORT"


# change NAME NEW_ADDR COMMANDS...: run the commands (which move the client
# to NEW_ADDR) in the middle of a 4 s ping and a 20 MB transfer, then check
# the connection moved with it.
change() {
	local name=$1 new=$2 mig0 reb0 gaps xfer t0
	shift 2
	mig0=$(cget migrations)
	reb0=$(sgetp rebinds)
	ping_bg "ping-$name" 4
	local ping_pid=$PING_PID
	tool_bg "xfer-$name" "$RNS_C" xfer-send "127.0.0.1:$FWD_PORT" 20M --duration 3 --timeout 60
	local xfer_pid=$BG_PID
	# The change falls in the middle of both.
	sleep 1.5
	t0=$(now_s)
	"$@"
	log "$name: network changed at $t0"
	wait_exit "$xfer_pid" 60
	xfer=$(tail -n 1 "$WORK/xfer-$name.log")
	wait_exit "$ping_pid" 20
	gaps=$(tool gaps "$WORK/ping-$name.log" --after "$t0")
	log "$name: ping $gaps"
	log "$name: transfer $xfer"
	assert_eq "$name: 20 MB through the LocalForward across the change, sha256 equal" \
		1 "$(jf "$xfer" ok)"
	assert_cmp "$name: longest ping gap (ms)" "$(jf "$gaps" max_gap_ms)" -le 500
	assert_eq "$name: roved's handshakes" 1 "$(sgetp handshakes)"
	assert_eq "$name: client's handshakes" 1 "$(cget handshakes)"
	assert_eq "$name: client reconnects" 0 "$(cget reconnects)"
	# One change of path, one migration (the debounce merges the burst).
	assert_eq "$name: client migrations" $((mig0 + 1)) "$(cget migrations)"
	assert_cmp "$name: roved's rebinds" "$(sgetp rebinds)" -ge $((reb0 + 1))
	if wait_for 5 "the client's path to leave from $new" client_local_is "$new"; then
		pass "$name: the client's path now leaves from $new"
	else
		failc "$name: the client's path leaves from $(local_ip), not $new"
	fi
	log "$name: migrations $(cget migrations), path validations $(cget path_validations)" \
		"(failed $(cget path_validation_failures)), roved rebinds $(sgetp rebinds)"
}

# 1. Another link: the new address comes up on link B, the old one on link
# A is deleted, then the default route moves to link B.
change other-link "$C_B" roam_to_link_b

# 2. The same link: a second address on link B, the default route moves to
# it, then the old address is deleted (promote_secondaries keeps the new).
C_B2=198.18.11.3
same_link() {
	ip -n "$RNS_C" addr add "$C_B2/24" dev cb &&
		ip -n "$RNS_C" route replace default via "$R_B" dev cb src "$C_B2" &&
		ip -n "$RNS_C" addr del "$C_B/24" dev cb
}
change same-link "$C_B2" same_link
expect_addrs="inet $C_B2/24"
assert_eq "client's addresses on link B" "$expect_addrs" \
	"$(ip -n "$RNS_C" -4 -o addr show dev cb | awk '{ print $3, $4 }')"
roam_stop_all
roam_finish
