#!/usr/bin/env bash
# Two live uplinks, as on a laptop with Wi-Fi (link A, preferred: lower
# route metric) and LTE (link B), each behind its own NAT address. Link A
# goes down and comes back 10 times (20 moves), 1.5 s apart, while a ping
# runs through the tunnel every 10 ms and a transfer runs through the
# LocalForward. The session must survive every move: no new handshake, no
# reconnect, the transfer intact, and no ping gap longer than 500 ms.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up
roam_configs
roam_two_uplinks two-nat
FLIPS=20
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"
roam_fwd_sink

traffic_start flip 34 40M
sleep 2
t0=$(now_s)
for ((i = 1; i <= FLIPS; i++)); do
	if ((i % 2)); then
		# Its routes go with it: link B's default route is left.
		ip -n "$RNS_C" link set ca down
	else
		ip -n "$RNS_C" link set ca up
		ip -n "$RNS_C" route replace default via "$R_A" dev ca metric 100
	fi
	sleep 1.5
done
log "flipped $FLIPS times from $t0 on"
traffic_end flip "$t0"
log "migrations $(cget migrations), path validations $(cget path_validations)" \
	"(failed $(cget path_validation_failures)), roved rebinds $(sgetp rebinds)"
assert_eq "roved's handshakes" 1 "$(sgetp handshakes)"
assert_eq "client's handshakes" 1 "$(cget handshakes)"
assert_eq "client reconnects" 0 "$(cget reconnects)"
assert_cmp "client migrations" "$(cget migrations)" -ge "$FLIPS"
assert_eq "40 MB through the LocalForward across $FLIPS moves, sha256 equal" \
	1 "$(jf "$XFER" ok)"
assert_cmp "longest ping gap (ms)" "$(jf "$GAPS" max_gap_ms)" -le 500
if wait_for 5 "the client's path back on link A" client_local_is "$C_A"; then
	pass "the client's path leaves from $C_A (the preferred uplink) at the end"
else
	failc "the client's path leaves from $(local_ip), not $C_A"
fi
roam_stop_all
roam_finish
