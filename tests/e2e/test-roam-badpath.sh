#!/usr/bin/env bash
# A new path that leads nowhere: the client gains an address on link B and
# the default route moves there, but the router drops everything arriving
# on link B (a captive portal, a dead access point). Link A and its address
# stay, reachable by source routing as on any multi-homed host. rove must
# try the new path, see its validation fail, and stay on link A: same
# connection, no reconnect, pings through the tunnel on time throughout.
# When link B starts working, the next route change moves the connection
# there.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up
roam_configs
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"

# Replies to C_A keep leaving through link A whatever the default route.
ip -n "$RNS_C" route add default via "$R_A" dev ca table 10 ||
	die "cannot add the source route table"
ip -n "$RNS_C" rule add from "$C_A" lookup 10 pref 100 || die "cannot add the source rule"
nsx "$RNS_R" nft -f - <<-EOF || die "cannot load the router's drop rule"
table ip badpath {
	chain forward {
		type filter hook forward priority filter; policy accept;
		iifname "rb" counter drop
	}
}
EOF
dropped() {
	nsx "$RNS_R" nft list chain ip badpath forward |
		awk '/counter/ { for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1) }'
}
failures_are() { [ "$(cget path_validation_failures)" = "$1" ]; }
local_is() { [ "$(local_ip)" = "$1" ]; }

mig0=$(cget migrations)
fail0=$(cget path_validation_failures)
ping_bg ping-bad 8
sleep 1.5
t0=$(now_s)
ip -n "$RNS_C" addr add "$C_B/24" dev cb &&
	ip -n "$RNS_C" route replace default via "$R_B" dev cb ||
	die "cannot move the default route to link B"
log "default route moved to the dead link B at $t0"
wait_for 15 "the validation of link B to fail" failures_are $((fail0 + 1)) ||
	failc "no failed path validation after 15 s (failures $(cget path_validation_failures))"
wait_exit "$PING_PID" 30
gaps=$(tool gaps "$WORK/ping-bad.log" --after "$t0")
log "dead path: ping $gaps"
assert_eq "client migrations (one attempt)" $((mig0 + 1)) "$(cget migrations)"
assert_eq "client's failed path validations" $((fail0 + 1)) "$(cget path_validation_failures)"
assert_cmp "packets the router dropped on link B" "$(dropped)" -ge 1
assert_cmp "longest ping gap while link B was tried (ms)" "$(jf "$gaps" max_gap_ms)" -le 500
assert_eq "client's handshakes" 1 "$(cget handshakes)"
assert_eq "roved's handshakes" 1 "$(sgetp handshakes)"
assert_eq "client reconnects" 0 "$(cget reconnects)"
assert_eq "client state" established "$(cget state)"
assert_eq "the client's path still leaves from" "$C_A" "$(local_ip)"

# Link B works now; the next change of route moves the connection there.
nsx "$RNS_R" nft delete table ip badpath || die "cannot remove the drop rule"
ping_bg ping-good 4
sleep 1
ip -n "$RNS_C" route del default &&
	ip -n "$RNS_C" route add default via "$R_B" dev cb ||
	die "cannot renew the default route"
if wait_for 10 "the client's path to leave from $C_B" local_is "$C_B"; then
	pass "after link B recovered the path leaves from $C_B"
else
	failc "the client's path leaves from $(local_ip), not $C_B"
fi
wait_exit "$PING_PID" 20
gaps=$(tool gaps "$WORK/ping-good.log")
log "working path: ping $gaps"
assert_cmp "ping loss moving to the working link B (%)" "$(jf "$gaps" loss_pct)" -le 2
assert_eq "client migrations" $((mig0 + 2)) "$(cget migrations)"
assert_eq "client's handshakes at the end" 1 "$(cget handshakes)"
roam_stop_all
roam_finish
