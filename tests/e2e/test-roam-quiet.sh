#!/usr/bin/env bash
# A quiet session on a long round trip (200 ms): the first packet after
# more than 2 s of quiet waits a round trip for its acknowledgement, like
# every packet. That wait is no silent path: rove must neither move to a
# new local port (a cut flow's remedy, after 1 s of silence) nor race TLS
# over TCP (after 2 s) for it. Six pings through the tunnel, each after
# 2.5 s of quiet, and a keepalive: every ping answered, no migration, no
# TCP attempt, one session throughout.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up 100
roam_configs
server_key "$RCONF_S" ListenTCP "$S_OUT:443"
conf_set "$RCONF_C" KeepAlive 4
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"
sleep 2
mig0=$(cget migrations)
answered=0
for ((i = 1; i <= 6; i++)); do
	sleep 2.5
	nsx "$RNS_C" ping -c 1 -W 2 "$S_TUN" >/dev/null && answered=$((answered + 1))
done
assert_eq "pings answered, each after 2.5 s of quiet" 6 "$answered"
assert_eq "rove's migrations while quiet" "$mig0" "$(cget migrations)"
assert_eq "moves to a new local port" 0 "$(cget port_moves)"
roam_assert_no_tcp_race
assert_eq "transport" quic "$(cget transport)"
assert_eq "moves to TCP" 0 "$(cget tcp_fallbacks)"
assert_eq "client's handshakes" 1 "$(cget handshakes)"
assert_eq "roved's handshakes" 1 "$(sgetp handshakes)"
roam_stop_all
roam_finish
