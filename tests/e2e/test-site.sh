#!/usr/bin/env bash
# Site-to-site: the LAN behind the server and the site LAN behind the branch
# client reach each other through roved (the branch's AllowedIPs), and the
# laptop reaches the LAN behind the server (its Routes).
# e2e: light
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
topo_up
up_all

P=(-c 20 -i 0.05)
check "LAN host $LAN_HOST -> site host $SITE_HOST" ping_ok "$NS_LAN" "${P[@]}" "$SITE_HOST"
check "site host $SITE_HOST -> LAN host $LAN_HOST" ping_ok "$NS_SITE" "${P[@]}" "$LAN_HOST"
check "laptop -> LAN host $LAN_HOST" ping_ok "$NS_LAP" "${P[@]}" "$LAN_HOST"
check "LAN host -> laptop $LAP_TUN4" ping_ok "$NS_LAN" "${P[@]}" "$LAP_TUN4"

# 40 echo requests and 40 replies crossed between the two LANs: the branch
# received the 20 requests from the LAN host and the 20 replies to the site
# host.
rx=$(sget "$NS_BR" "$BR_SOCK" 'peers[0].rx_packets')
if [ "$rx" -ge 40 ] 2>/dev/null; then
	ok "branch received $rx packets from the tunnel (>= 40)"
else
	fail "branch received $rx packets from the tunnel, expected >= 40"
fi
expect_eq "server drops.spoofed_source" 0 "$(srv_get drops.spoofed_source)"
if grep -q "does not forward" "$WORK/branch.log"; then
	fail "the branch warned about forwarding, which is on"
else
	ok "the branch, forwarding, did not warn"
fi

# A branch gateway whose host does not forward: the LAN's packets to the
# site die there, and rove says why, once.
stop_pid "$BR_PID"; forget_pid "$BR_PID"
mv "$WORK/branch.log" "$WORK/branch-1.log"
nsx "$NS_BR" sysctl -qw net.ipv4.ip_forward=0
start_client branch
wait_established branch || die "the branch does not reconnect"
if ping_ok "$NS_LAN" -c 3 -i 0.05 -W 1 "$SITE_HOST"; then
	fail "LAN host -> site host got through a branch that does not forward"
else
	ok "LAN host -> site host: dropped at a branch that does not forward"
fi
expect_eq "the branch warned once that it does not forward" 1 \
	"$(grep -c "packets for $SITE_HOST come through the tunnel (the server routes a network to this host), but this host does not forward IPv4: they are dropped; sysctl -w net.ipv4.ip_forward=1" "$WORK/branch.log")"
e2e_finish
