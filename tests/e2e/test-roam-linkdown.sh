#!/usr/bin/env bash
# Link down for 15 s, then up: with an IdleTimeout above the outage the
# connection must survive (no new handshake), and on link-up rove must probe
# at once (a migration to a fresh socket) instead of waiting out its
# retransmission back-off: pings flow again within 2 s of link-up.
# Two ways a link goes down:
#   carrier: the far end of link A goes away (a cable pulled, an access
#     point gone); the client's interface stays up and keeps its routes.
#   admin: `ip link set ca down` on the client; the kernel deletes the
#     routes through ca, and when the link comes back the network manager
#     restores the default route a moment later (here 0.5 s, as a DHCP
#     client would), so the route and the link return as separate events.
#     In between, the server's packets already reach the client (pings
#     from the LAN host through the tunnel): arriving packets must not
#     convince rove that its own path works.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up
roam_configs
conf_set "$RCONF_C" IdleTimeout 60
conf_set "$RCONF_S" IdleTimeout 60
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"

# outage NAME DOWN_CMD UP_CMD: 15 s between the two under 10 ms pings.
outage() {
	local name=$1 down=$2 up=$3 mig0 t_up gaps
	mig0=$(cget migrations)
	# 2 s before, 15 s down, 8 s after: long enough for the retransmission
	# back-off to leave the next probe seconds past link-up (0.2 s doubling:
	# 12.6 s, then 25.4 s).
	ping_bg "ping-$name" 25
	sleep 2
	$down || die "$name: cannot take link A down"
	log "$name: link A down at $(now_s)"
	sleep 15
	assert_eq "$name: client state after 15 s without a link" established "$(cget state)"
	assert_eq "$name: roved's state after 15 s without the client" established "$(sgetp state)"
	t_up=$(now_s)
	$up || die "$name: cannot bring link A up"
	log "$name: link A up at $t_up"
	wait_exit "$PING_PID" 60
	gaps=$(tool gaps "$WORK/ping-$name.log" --after "$t_up")
	log "$name: ping $gaps"
	assert_cmp "$name: first ping reply after link-up (ms)" \
		"$(jf "$gaps" first_after_ms)" -le 2000
	assert_eq "$name: roved's handshakes" 1 "$(sgetp handshakes)"
	assert_eq "$name: client's handshakes" 1 "$(cget handshakes)"
	assert_eq "$name: client reconnects" 0 "$(cget reconnects)"
	assert_eq "$name: client state" established "$(cget state)"
	assert_cmp "$name: client migrations (a probe on link-up)" \
		"$(cget migrations)" -ge $((mig0 + 1))
	log "$name: migrations $(cget migrations), path validations" \
		"$(cget path_validations) (failed $(cget path_validation_failures))," \
		"roved rebinds $(sgetp rebinds)"
}

carrier_down() { ip -n "$RNS_R" link set ra down; }
carrier_up() { ip -n "$RNS_R" link set ra up; }
admin_down() { ip -n "$RNS_C" link set ca down; }
admin_up() {
	ip -n "$RNS_C" link set ca up || return 1
	sleep 0.1
	nsx "$RNS_L" ping -c 4 -i 0.05 -W 0.1 "$C_TUN" >/dev/null 2>&1
	sleep 0.2
	ip -n "$RNS_C" route replace default via "$R_A" dev ca
}

outage carrier carrier_down carrier_up
outage admin admin_down admin_up
roam_stop_all
roam_finish
