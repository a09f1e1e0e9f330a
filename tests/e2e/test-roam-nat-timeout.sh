#!/usr/bin/env bash
# A NAT that forgets a UDP mapping after 3 s of quiet, shorter than the
# client's KeepAlive (10 s): every keepalive then comes from a new outer
# port, and whatever the server sends in between (here pings from the LAN
# host to the laptop) is lost. roved tells the client how long it had been
# quiet before each change of address (PATH_NOTICE); rove must shorten its
# keepalive until the mapping holds: under 3 s within 30 s, after which
# every ping from the LAN host gets through, with no further change of
# address.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up
roam_configs
conf_set "$RCONF_C" KeepAlive 10
nsx "$RNS_R" sysctl -qw net.netfilter.nf_conntrack_udp_timeout=3 \
	net.netfilter.nf_conntrack_udp_timeout_stream=3 ||
	die "cannot shorten the router's UDP timeouts"
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"

keepalive_short() { [ "$(cget keepalive_ms)" -lt 3000 ] 2>/dev/null; }
assert_eq "the configured keepalive at first (ms)" 10000 "$(cget keepalive_ms)"
if wait_for 40 "the keepalive under the NAT's 3 s" keepalive_short; then
	pass "the keepalive went down to $(cget keepalive_ms) ms"
else
	failc "the keepalive is still $(cget keepalive_ms) ms"
fi
reb0=$(sgetp rebinds)
# 15 s of pings from the LAN host, one a second: the laptop sends nothing
# of its own but its keepalives and the replies.
out=$(nsx "$RNS_L" ping -n -c 15 -i 1 -W 1 "$C_TUN" 2>&1 | tail -n 2)
log "pings from the LAN host: $out"
received=$(printf '%s\n' "$out" | sed -n 's/.* \([0-9]*\) received.*/\1/p')
assert_eq "pings from the LAN host answered" 15 "$received"
assert_eq "roved's rebinds while the keepalive holds the mapping" "$reb0" "$(sgetp rebinds)"
assert_eq "client's handshakes" 1 "$(cget handshakes)"
roam_stop_all
roam_finish
