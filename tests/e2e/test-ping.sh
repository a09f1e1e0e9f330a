#!/usr/bin/env bash
# Pings through the tunnel in every direction, and the MTU at its edges:
# the kernel's frag-needed at the TUN MTU, and roved's own ICMP when the TUN
# MTU is larger than what one QUIC datagram carries.
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
topo_up
up_all

P=(-c 20 -i 0.05)
check "laptop -> server $SRV_TUN4" ping_ok "$NS_LAP" "${P[@]}" "$SRV_TUN4"
check "server -> laptop $LAP_TUN4" ping_ok "$NS_SRV" "${P[@]}" "$LAP_TUN4"
check "laptop -> server $SRV_TUN6" ping_ok "$NS_LAP" "${P[@]}" "$SRV_TUN6"
check "server -> laptop $LAP_TUN6" ping_ok "$NS_SRV" "${P[@]}" "$LAP_TUN6"
check "branch -> server $SRV_TUN4" ping_ok "$NS_BR" "${P[@]}" "$SRV_TUN4"
check "server -> branch $BR_TUN4" ping_ok "$NS_SRV" "${P[@]}" "$BR_TUN4"
check "laptop -> branch $BR_TUN4" ping_ok "$NS_LAP" "${P[@]}" "$BR_TUN4"
check "branch -> laptop $LAP_TUN4" ping_ok "$NS_BR" "${P[@]}" "$LAP_TUN4"

# Each direction's packets were counted on both ends: laptop sent 40 echo
# requests (v4 + v6) to the server and answered 40 of the server's.
expect_eq "laptop tx_packets >= 80" yes \
	"$([ "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].tx_packets')" -ge 80 ] && echo yes || echo no)"

# ping_mtu NS DEST SIZE: ping once with DF set and SIZE bytes of payload;
# its output in $PING_OUT, its exit status returned.
ping_mtu() {
	PING_OUT=$(nsx "$1" ping -n -c 1 -W 2 -M "do" -s "$3" "$2" 2>&1)
}

# The largest packet that fits the TUN passes; one byte more is refused by
# the sending kernel itself with the route's MTU.
if ping_mtu "$NS_LAP" "$SRV_TUN4" $((MTU - 28)); then
	ok "laptop -> server: $MTU-byte IPv4 packet with DF passes"
else
	fail "laptop -> server: $MTU-byte IPv4 packet with DF: $PING_OUT"
fi
if ping_mtu "$NS_LAP" "$SRV_TUN4" $((MTU - 28 + 1)); then
	fail "laptop -> server: $((MTU + 1))-byte IPv4 packet with DF passed"
elif printf '%s' "$PING_OUT" | grep -q "message too long, mtu=$MTU"; then
	ok "laptop -> server: $((MTU + 1)) bytes: message too long, mtu=$MTU"
else
	fail "laptop -> server: $((MTU + 1)) bytes, expected 'message too long, mtu=$MTU': $PING_OUT"
fi
if ping_mtu "$NS_LAP" "$SRV_TUN6" $((MTU - 48)); then
	ok "laptop -> server: $MTU-byte IPv6 packet passes"
else
	fail "laptop -> server: $MTU-byte IPv6 packet: $PING_OUT"
fi
if ping_mtu "$NS_LAP" "$SRV_TUN6" $((MTU - 48 + 1)); then
	fail "laptop -> server: $((MTU + 1))-byte IPv6 packet passed"
elif printf '%s' "$PING_OUT" | grep -q "message too long, mtu: $MTU"; then
	ok "laptop -> server: $((MTU + 1))-byte IPv6: message too long, mtu=$MTU"
else
	fail "laptop -> server: $((MTU + 1))-byte IPv6, expected 'message too long, mtu: $MTU': $PING_OUT"
fi

# From the LAN host, the server's kernel answers with frag needed.
if ping_mtu "$NS_LAN" "$LAP_TUN4" $((MTU - 28)); then
	ok "LAN host -> laptop: $MTU-byte packet passes"
else
	fail "LAN host -> laptop: $MTU-byte packet: $PING_OUT"
fi
if ping_mtu "$NS_LAN" "$LAP_TUN4" $((MTU - 28 + 1)); then
	fail "LAN host -> laptop: $((MTU + 1))-byte packet with DF passed"
elif printf '%s' "$PING_OUT" | grep -q "Frag needed and DF set (mtu = $MTU)"; then
	ok "LAN host -> laptop: $((MTU + 1)) bytes: Frag needed (mtu = $MTU)"
else
	fail "LAN host -> laptop: $((MTU + 1)) bytes, expected 'Frag needed and DF set (mtu = $MTU)': $PING_OUT"
fi

# Now a TUN MTU of 1500, more than one QUIC datagram carries on a 1500-byte
# outer link: roved itself must answer with frag needed, carrying the
# largest inner packet that fits ("datagram_mtu").
stop_pid "$BR_PID"; forget_pid "$BR_PID"
stop_pid "$LAP_PID"; forget_pid "$LAP_PID"
rc=0; stop_pid "$ROVED_PID" || rc=$?
forget_pid "$ROVED_PID"
expect_eq "roved exit status on SIGTERM" 0 "$rc"
if ip -n "$NS_SRV" link show rove0 >/dev/null 2>&1; then
	fail "rove0 is still there after roved exited"
fi
mv "$WORK/roved.log" "$WORK/roved-1380.log"
mv "$WORK/laptop.log" "$WORK/laptop-1380.log"

conf=$WORK/configs/roved-1500.conf
cp "$WORK/configs/roved.conf" "$conf"
conf_set "$conf" MTU 1500
start_roved "$conf"
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up with MTU 1500"
expect_eq "server TUN MTU" 1500 "$(srv_get mtu)"
DMTU=$(srv_get datagram_mtu)
log "server datagram_mtu: $DMTU"
if ! [ "$DMTU" -gt 1280 ] 2>/dev/null || ! [ "$DMTU" -lt 1500 ]; then
	fail "datagram_mtu $DMTU is not between 1280 and 1500 on a 1500-byte link"
	DMTU=1400
fi
TB0=$(srv_get drops.too_big)

# lan_ptb SIZE: a DF ping from the LAN host that must come back as frag
# needed with mtu = datagram_mtu.
lan_ptb() {
	# Forget the path MTU learnt from the previous answer, so the LAN
	# host's kernel sends the packet instead of refusing it locally.
	ip -n "$NS_LAN" route flush cache
	if ping_mtu "$NS_LAN" "$LAP_TUN4" "$1"; then
		fail "LAN host -> laptop: $(($1 + 28)) bytes over TUN MTU 1500 passed (datagram_mtu $DMTU)"
	elif printf '%s' "$PING_OUT" | grep -q "Frag needed and DF set (mtu = $DMTU)"; then
		ok "LAN host -> laptop: $(($1 + 28)) bytes: roved answers Frag needed (mtu = $DMTU)"
	else
		fail "LAN host -> laptop: $(($1 + 28)) bytes, expected 'Frag needed and DF set (mtu = $DMTU)': $PING_OUT"
	fi
}
# The first phase left path MTU 1380 in the LAN host's route cache.
ip -n "$NS_LAN" route flush cache
if ping_mtu "$NS_LAN" "$LAP_TUN4" $((DMTU - 28)); then
	ok "LAN host -> laptop: $DMTU-byte packet (datagram_mtu) passes"
else
	fail "LAN host -> laptop: $DMTU-byte packet (datagram_mtu): $PING_OUT"
fi
lan_ptb 1450
lan_ptb $((DMTU - 28 + 1))
lan_ptb 1472
expect_eq "drops.too_big after 3 oversized packets" $((TB0 + 3)) "$(srv_get drops.too_big)"
# The answer lowered the LAN host's path MTU; the next big ping is refused
# at the sender without reaching roved.
if ping_mtu "$NS_LAN" "$LAP_TUN4" 1450; then
	fail "LAN host -> laptop: 1478 bytes passed after the path MTU dropped"
elif printf '%s' "$PING_OUT" | grep -q "message too long, mtu=$DMTU"; then
	ok "LAN host learnt path MTU $DMTU"
else
	fail "LAN host did not learn path MTU $DMTU: $PING_OUT"
fi
expect_eq "drops.too_big unchanged by a locally refused packet" $((TB0 + 3)) "$(srv_get drops.too_big)"

# IPv6: roved answers an oversized packet from its own host with ICMPv6
# packet too big.
if ping_mtu "$NS_SRV" "$LAP_TUN6" $((1500 - 48)); then
	fail "server -> laptop: 1500-byte IPv6 packet passed (datagram_mtu $DMTU)"
elif printf '%s' "$PING_OUT" | grep -q "Packet too big: mtu=$DMTU"; then
	ok "server -> laptop: 1500-byte IPv6: roved answers Packet too big (mtu=$DMTU)"
else
	fail "server -> laptop: 1500-byte IPv6, expected 'Packet too big: mtu=$DMTU': $PING_OUT"
fi
expect_eq "drops.too_big after the IPv6 packet" $((TB0 + 4)) "$(srv_get drops.too_big)"

# The client does the same for what its own TUN hands it (its TUN MTU is
# the server's, 1500).
expect_eq "laptop TUN MTU" 1500 "$(sget "$NS_LAP" "$LAP_SOCK" mtu)"
CTB0=$(sget "$NS_LAP" "$LAP_SOCK" drops.too_big)
if ping_mtu "$NS_LAP" "$SRV_TUN4" $((1500 - 28)); then
	fail "laptop -> server: 1500-byte packet passed (datagram_mtu $DMTU)"
elif printf '%s' "$PING_OUT" | grep -q "Frag needed and DF set (mtu = $DMTU)"; then
	ok "laptop -> server: 1500 bytes: rove answers Frag needed (mtu = $DMTU)"
else
	fail "laptop -> server: 1500 bytes, expected 'Frag needed and DF set (mtu = $DMTU)': $PING_OUT"
fi
expect_eq "laptop drops.too_big" $((CTB0 + 1)) "$(sget "$NS_LAP" "$LAP_SOCK" drops.too_big)"

# rove status -c finds the control socket in either program's config.
expect_eq "rove status -c roved.conf: role" server \
	"$(nsx "$NS_SRV" "$BUILD/rove" status -c "$conf" --json | jget role)"
expect_eq "rove status -c rove.conf: role" client \
	"$(nsx "$NS_LAP" "$BUILD/rove" status -c "$WORK/configs/rove.conf" --json | jget role)"

e2e_finish
