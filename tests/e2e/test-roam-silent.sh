#!/usr/bin/env bash
# Silent Wi-Fi: a laptop with two uplinks, link A (Wi-Fi, preferred by its
# route metric) and link B (LTE), each with its own public address at the
# NAT. Link A stays up with its route, but passes nothing (the router drops
# everything through ra): no netlink event tells rove. Default client
# settings (Transport = auto; roved listens on TCP too). rove must notice
# the silence and move the session to link B by itself: pings through the
# tunnel back within 3 s, on the same session, and a transfer through the
# LocalForward across it all intact. When link A passes packets again,
# rove must move back to it (it is preferred). Then, with link A alone,
# 20 s of silence must cost neither the session nor the forward's
# connection.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up
roam_configs
server_key "$RCONF_S" ListenTCP "$S_OUT:443"
roam_two_uplinks two-nat
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"
roam_fwd_sink

# 1. Two uplinks: link A silent for 12 s.
traffic_start silent 30 8M
sleep 2
t0=$(now_s)
roam_drop silent on || die "cannot silence link A"
log "link A silent from $t0"
if wait_for 5 "the session on link B" client_local_is "$C_B"; then
	pass "the session left the silent link A for link B"
else
	failc "the session leaves from $(local_ip), not $C_B"
fi
sleep 10
roam_drop silent off
log "link A passes packets again from $(now_s)"
if wait_for 20 "the session back on link A" client_local_is "$C_A"; then
	pass "the session is back on link A, the preferred uplink"
else
	failc "the session leaves from $(local_ip), not $C_A"
fi
traffic_end silent "$t0"
log "migrations $(cget migrations), uplink moves $(cget uplink_moves), path validations" \
	"$(cget path_validations) (failed $(cget path_validation_failures))"
assert_cmp "longest ping gap from the silence on (ms)" "$(jf "$GAPS" max_gap_ms)" -le 3000
assert_eq "8 MB through the LocalForward across both moves, sha256 equal" 1 "$(jf "$XFER" ok)"
assert_cmp "uplink moves" "$(cget uplink_moves)" -ge 1
assert_eq "client's handshakes" 1 "$(cget handshakes)"
assert_eq "client reconnects" 0 "$(cget reconnects)"
assert_eq "transport" quic "$(cget transport)"
assert_eq "roved's handshakes" 1 "$(sgetp handshakes)"

# 2. Link A alone (link B's route gone): 20 s of silence, less than the
# IdleTimeout. The session must wait it out and come back on QUIC, asking
# the path again from fresh sockets, so the forward's connection open
# across it survives. TCP to roved is refused here: a TLS-over-TCP attempt
# that completes at roved just as the silence ends replaces the QUIC
# session there, whatever the client decides (a known gap).
ip -n "$RNS_C" route del default via "$R_B" dev cb
roam_drop notcp on "ip daddr $S_OUT tcp dport 443 reject with tcp reset"
sleep 1
hs0=$(cget handshakes)
traffic_start alone 36 4M
sleep 2
roam_drop silent on || die "cannot silence link A"
sleep 20
t1=$(now_s)
roam_drop silent off
log "link A alone: silent for 20 s until $t1"
traffic_end alone "$t1"
# The path is asked again 1, 2, 4, then every 8 s (each ask costs one of
# roved's connection IDs, which come back only with the path).
assert_cmp "link A alone: first ping reply after the silence (ms)" \
	"$(jf "$GAPS" first_after_ms)" -le 10000
assert_eq "link A alone: the forward connection across 20 s of silence, sha256 equal" \
	1 "$(jf "$XFER" ok)"
assert_eq "link A alone: client's handshakes" "$hs0" "$(cget handshakes)"
assert_eq "link A alone: transport" quic "$(cget transport)"
roam_drop notcp off
roam_stop_all
roam_finish
