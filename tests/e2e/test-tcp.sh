#!/usr/bin/env bash
# The session over TLS on TCP (Transport = tcp, roved's ListenTCP): the
# tunnel carries pings both ways and IPv6, a LocalForward carries bytes
# both ways, status says tcp on both sides, and not one UDP packet leaves
# the laptop for the server (counted by nftables in its namespace).
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
e2e_transport tcp
topo_up

L_PORT=7001
T_PORT=7101
peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
client_add "$WORK/configs/rove.conf" "LocalForward = $L_PORT = $LAN_HOST:$T_PORT"

# Every UDP packet from the laptop to the server, counted.
nsx "$NS_LAP" nft -f - <<NFT || die "cannot load the UDP counter"
table inet rove_udp {
	counter udp_out { }
	chain out {
		type filter hook output priority 0; policy accept;
		ip daddr $SRV_OUTER meta l4proto udp counter name udp_out
	}
}
NFT
udp_out() {
	nsx "$NS_LAP" nft -j list counter inet rove_udp udp_out |
		"$PY" -c 'import json,sys; d=json.load(sys.stdin)["nftables"]; print([o["counter"]["packets"] for o in d if "counter" in o][0])'
}

start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up over TCP"
expect_eq "rove: transport" tcp "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].transport')"
expect_eq "roved: laptop's transport" tcp "$(srv_get 'peers[name=laptop].transport')"
expect_eq "rove: the server's endpoint is its TCP one" "$SRV_OUTER:443" \
	"$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].remote')"
expect_eq "roved: laptop's endpoint is its TCP connection" "$LAP_OUTER" \
	"$(srv_get 'peers[name=laptop].remote' | sed 's/:[0-9]*$//')"
wait_for 10 "the laptop's IPv6 tunnel address" tun_ready "$NS_LAP" "$LAP_TUN6" ||
	fail "no IPv6 address on the laptop's rove0"

check "laptop -> server $SRV_TUN4 through the tunnel" ping_ok "$NS_LAP" -c 20 -i 0.05 "$SRV_TUN4"
check "laptop -> server $SRV_TUN6 through the tunnel" ping_ok "$NS_LAP" -c 10 -i 0.05 "$SRV_TUN6"
check "server -> laptop $LAP_TUN4 through the tunnel" ping_ok "$NS_SRV" -c 10 -i 0.05 "$LAP_TUN4"
check "laptop -> LAN host $LAN_HOST (routed by roved)" ping_ok "$NS_LAP" -c 10 -i 0.05 "$LAN_HOST"
check "1300-byte pings (inner MTU $MTU)" ping_ok "$NS_LAP" -c 5 -i 0.1 -s 1300 -M do "$SRV_TUN4"

peer_bg target "$NS_LAN" serve "$LAN_HOST:$T_PORT" --send 4M --results "$WORK/target.json"
wait_listen "$NS_LAN" "$T_PORT" "the -L target"
wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"
out=$(peer_run "$NS_LAP" 60 connect "127.0.0.1:$L_PORT" --send 4M --timeout 30)
wait_for 10 "the target's result" has_lines "$WORK/target.json" 1 ||
	fail "the target reported nothing"
s=$(head -n1 "$WORK/target.json")
expect_eq "forward: client sent" $((4 << 20)) "$(jfield "$out" tx)"
expect_eq "forward: client received" $((4 << 20)) "$(jfield "$out" rx)"
expect_eq "forward: sha256 client -> target" "$(jfield "$out" tx_sha)" "$(jfield "$s" rx_sha)"
expect_eq "forward: sha256 target -> client" "$(jfield "$s" tx_sha)" "$(jfield "$out" rx_sha)"
expect_eq "forward: errors" '[]' "$(jfield "$out" errors)"

expect_eq "UDP packets from the laptop to the server" 0 "$(udp_out)"
expect_eq "roved: laptop handshakes" 1 "$(srv_get 'peers[name=laptop].handshakes')"
fwd_finish
