#!/usr/bin/env bash
# Silent Wi-Fi: a laptop with two uplinks, link A (Wi-Fi, preferred by its
# route metric) and link B (LTE), each with its own public address at the
# NAT. Link A stays up with its route, but passes nothing (the router drops
# everything through ra): no netlink event tells rove. Default client
# settings (Transport = auto; roved listens on TCP too). rove must notice
# the silence and move the session to link B by itself: pings through the
# tunnel back within 3 s, on the same session, and a transfer through the
# LocalForward across it all intact. When link A passes packets again,
# rove must move back to it (it is preferred) without a gap.
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up
roam_configs
server_key "$RCONF_S" ListenTCP "$S_OUT:443"
ip -n "$RNS_C" addr add "$C_B/24" dev cb
R_S2=198.18.20.3
ip -n "$RNS_R" addr add "$R_S2/24" dev rs
nsx "$RNS_R" nft -f - <<EOF || die "cannot load link B's NAT rule"
table ip roamb {
	chain post {
		type nat hook postrouting priority srcnat - 1; policy accept;
		ip saddr 198.18.11.0/24 oifname "rs" snat to $R_S2 random
	}
}
EOF
ip -n "$RNS_C" route del default via "$R_A" dev ca
ip -n "$RNS_C" route add default via "$R_A" dev ca metric 100
ip -n "$RNS_C" route add default via "$R_B" dev cb metric 200
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"
tool_bg xfer-serve "$RNS_L" xfer-serve "$LAN:$FWD_PORT" --timeout 200
wait_for 10 "the transfer sink" ready_in "$WORK/xfer-serve.log" || die "xfer-serve did not start"
wait_for 10 "rove's LocalForward" tcp_port_open "$RNS_C" "$FWD_PORT" ||
	die "rove does not listen on 127.0.0.1:$FWD_PORT"

local_ip() { local l; l=$(cget local); echo "${l%:*}"; }
client_local_is() { [ "$(local_ip)" = "$1" ]; }
# silent on|off: link A passes nothing, or everything again.
silent() {
	if [ "$1" = on ]; then
		nsx "$RNS_R" nft -f - <<-EOF
		table ip silent {
			chain through {
				type filter hook forward priority -10; policy accept;
				iifname "ra" drop
				oifname "ra" drop
			}
		}
		EOF
	else
		nsx "$RNS_R" nft delete table ip silent
	fi
}

ping_bg ping-silent 30
tool_bg xfer "$RNS_C" xfer-send "127.0.0.1:$FWD_PORT" 8M --duration 26 --timeout 90
xfer_pid=$BG_PID
sleep 2
t0=$(now_s)
silent on || die "cannot silence link A"
log "link A silent from $t0"
if wait_for 5 "the session on link B" client_local_is "$C_B"; then
	pass "the session left the silent link A for link B"
else
	failc "the session leaves from $(local_ip), not $C_B"
fi
sleep 10
t1=$(now_s)
silent off
log "link A passes packets again from $t1"
if wait_for 20 "the session back on link A" client_local_is "$C_A"; then
	pass "the session is back on link A, the preferred uplink"
else
	failc "the session leaves from $(local_ip), not $C_A"
fi
wait_exit "$xfer_pid" 90
xfer=$(tail -n 1 "$WORK/xfer.log")
wait_exit "$PING_PID" 40
silence=$(tool gaps "$WORK/ping-silent.log" --after "$t0")
log "ping from the silence on: $silence"
log "transfer $xfer"
log "migrations $(cget migrations), uplink moves $(cget uplink_moves), path validations" \
	"$(cget path_validations) (failed $(cget path_validation_failures))"
assert_cmp "longest ping gap from the silence on (ms)" "$(jf "$silence" max_gap_ms)" -le 3000
assert_eq "8 MB through the LocalForward across both moves, sha256 equal" 1 "$(jf "$xfer" ok)"
assert_cmp "uplink moves" "$(cget uplink_moves)" -ge 1
assert_eq "client's handshakes" 1 "$(cget handshakes)"
assert_eq "client reconnects" 0 "$(cget reconnects)"
assert_eq "transport" quic "$(cget transport)"
assert_eq "roved's handshakes" 1 "$(sgetp handshakes)"
roam_stop_all
roam_finish
