#!/usr/bin/env bash
# Two live uplinks, as on a laptop with Wi-Fi (link A, preferred: lower
# route metric) and LTE (link B). Link A goes down and comes back 10 times
# (20 moves), 1.5 s apart, while a ping runs through the tunnel every 10 ms
# and a transfer runs through the LocalForward. The session must survive
# every move: no new handshake, no reconnect, the transfer intact, and no
# ping gap longer than a few hundred ms.
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up "${ROAM_FLIP_DELAY:-0}"
roam_configs
FLIPS=${ROAM_FLIPS:-20}
ip -n "$RNS_C" addr add "$C_B/24" dev cb
# Each uplink has its own public address, as behind two providers' NATs:
# roved sees the client move between two addresses, not two ports.
R_S2=198.18.20.3
ip -n "$RNS_R" addr add "$R_S2/24" dev rs
nsx "$RNS_R" nft -f - <<-EOF || die "cannot load link B's NAT rule"
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

GAP=${ROAM_FLIP_GAP:-1.5}
secs=$(awk -v f="$FLIPS" -v g="$GAP" 'BEGIN { printf "%d", f * g + 4 }')
ping_bg ping-flip "$secs"
ping_pid=$PING_PID
tool_bg xfer-flip "$RNS_C" xfer-send "127.0.0.1:$FWD_PORT" "${ROAM_FLIP_BYTES:-40M}" --duration $((secs - 2)) --timeout 120
xfer_pid=$BG_PID
sleep 2
t0=$(now_s)
for ((i = 1; i <= FLIPS; i++)); do
	if ((i % 2)); then
		ip -n "$RNS_C" link set ca down
		# Without A's addresses' routes the default route via B is left.
	else
		ip -n "$RNS_C" link set ca up
		ip -n "$RNS_C" route replace default via "$R_A" dev ca metric 100
	fi
	sleep "$GAP"
done
log "flipped $FLIPS times from $t0 on"
wait_exit "$xfer_pid" 120
xfer=$(tail -n 1 "$WORK/xfer-flip.log")
wait_exit "$ping_pid" 30
gaps=$(tool gaps "$WORK/ping-flip.log" --after "$t0")
log "ping $gaps"
log "transfer $xfer"
log "migrations $(cget migrations), path validations $(cget path_validations)" \
	"(failed $(cget path_validation_failures)), roved rebinds $(sgetp rebinds)"
assert_eq "roved's handshakes" 1 "$(sgetp handshakes)"
assert_eq "client's handshakes" 1 "$(cget handshakes)"
assert_eq "client reconnects" 0 "$(cget reconnects)"
assert_cmp "client migrations" "$(cget migrations)" -ge "$FLIPS"
assert_eq "40 MB through the LocalForward across $FLIPS moves, sha256 equal" \
	1 "$(jf "$xfer" ok)"
assert_cmp "longest ping gap (ms)" "$(jf "$gaps" max_gap_ms)" -le 500
if wait_for 5 "the client's path back on link A" client_local_is "$C_A"; then
	pass "the client's path leaves from $C_A (the preferred uplink) at the end"
else
	failc "the client's path leaves from $(local_ip), not $C_A"
fi
roam_stop_all
roam_finish
