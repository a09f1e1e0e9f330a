#!/usr/bin/env bash
# Cryptokey routing at roved: packets from the laptop with an inner source
# that is not the laptop's are dropped and counted, and never reach the LAN;
# packets to tunnel addresses no peer owns are dropped and counted too.
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
topo_up
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"

SPOOF=$TUN_NET4.99
NOBODY=$TUN_NET4.200
N=20

# Count, on the LAN host, every packet that arrives from the spoofed source
# and from the laptop's real address (the control: the counter works).
nsx "$NS_LAN" nft -f - <<NFT || die "cannot load the nftables counters"
table inet rove_e2e {
	counter spoofed { }
	counter genuine { }
	chain pre {
		type filter hook prerouting priority -300; policy accept;
		ip saddr $SPOOF counter name spoofed
		ip saddr $LAP_TUN4 icmp type echo-request counter name genuine
	}
}
NFT
nft_packets() {
	nsx "$NS_LAN" nft list counter inet rove_e2e "$1" |
		sed -n 's/.*packets \([0-9]*\).*/\1/p'
}

check "laptop -> LAN host from its own address" ping_ok "$NS_LAP" -c 5 -i 0.05 "$LAN_HOST"
expect_eq "LAN host counted echo requests from $LAP_TUN4" 5 "$(nft_packets genuine)"

S0=$(srv_get drops.spoofed_source)
P0=$(srv_get 'peers[name=laptop].drops.spoofed_source')
ip -n "$NS_LAP" addr add "$SPOOF/32" dev rove0 || die "cannot add $SPOOF to the laptop's rove0"
out=$(nsx "$NS_LAP" ping -n -q -c $N -i 0.05 -W 1 -I "$SPOOF" "$LAN_HOST" 2>&1)
if printf '%s\n' "$out" | grep -q "$N packets transmitted, 0 received"; then
	ok "$N pings from $SPOOF: none answered"
else
	fail "pings from $SPOOF: $out"
fi
expect_eq "server drops.spoofed_source" $((S0 + N)) "$(srv_get drops.spoofed_source)"
expect_eq "server drops.spoofed_source of peer laptop" $((P0 + N)) \
	"$(srv_get 'peers[name=laptop].drops.spoofed_source')"
expect_eq "packets from $SPOOF seen on the LAN host" 0 "$(nft_packets spoofed)"
expect_eq "client drops.spoofed_source (the check is the server's)" 0 \
	"$(sget "$NS_LAP" "$LAP_SOCK" drops.spoofed_source)"

# The laptop's own address still works after the spoofed packets.
check "laptop -> LAN host from its own address, afterwards" ping_ok "$NS_LAP" -c 5 -i 0.05 "$LAN_HOST"

# A packet from the LAN host to a tunnel address that no peer owns goes into
# the server's TUN and no further.
NR0=$(srv_get drops.no_route)
out=$(nsx "$NS_LAN" ping -n -q -c $N -i 0.05 -W 1 "$NOBODY" 2>&1)
if printf '%s\n' "$out" | grep -q "$N packets transmitted, 0 received"; then
	ok "$N pings to $NOBODY (no peer): none answered"
else
	fail "pings to $NOBODY: $out"
fi
expect_eq "server drops.no_route" $((NR0 + N)) "$(srv_get drops.no_route)"
e2e_finish
