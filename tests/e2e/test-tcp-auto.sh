#!/usr/bin/env bash
# Transport = auto through a "router" (the switch namespace's bridge) that
# drops UDP to and from roved's port with nftables:
#  - UDP dropped from the start: the tunnel (ping) and a forward work
#    within 3 s of rove up, status says tcp;
#  - UDP let through again: the session moves back to QUIC within 30 s
#    while a ping runs (its longest gap reported), status says quic;
#  - UDP dropped mid-session on QUIC: rove notices (no acknowledgements)
#    and the tunnel is back over TCP within 5 s;
#  - back on TCP, UDP let through and a route changed on the laptop: QUIC
#    is probed at once and the session is back on it within 2 s; every
#    session after the first counts as a reconnect;
#  - UDP refused with ICMP port unreachable (at roved's host): TCP starts
#    on the error;
#  - Transport = quic never tries TCP, Transport = tcp never sends UDP
#    (the branch's packets counted at the router).
# e2e: light
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
e2e_transport auto
topo_up

L_PORT=7001
T_PORT=7101
peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
client_add "$WORK/configs/rove.conf" "LocalForward = $L_PORT = $LAN_HOST:$T_PORT"

nsx "$NS_SW" nft -f - <<NFT || die "cannot load the router's counters"
table bridge rove_router {
	counter udp_br { }
	counter tcp_br { }
	chain through {
		type filter hook forward priority 0; policy accept;
		ip saddr $BR_OUTER meta l4proto udp counter name udp_br
		ip saddr $BR_OUTER meta l4proto tcp counter name tcp_br
	}
}
NFT
router_count() {
	nsx "$NS_SW" nft -j list counter bridge rove_router "$1" |
		"$PY" -c 'import json,sys; d=json.load(sys.stdin)["nftables"]; print([o["counter"]["packets"] for o in d if "counter" in o][0])'
}
now() { date +%s.%N; }
elapsed() { "$PY" -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }
# le A B: A <= B, as decimals.
le() { "$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)" "$1" "$2"; }
lap_transport() { sget "$NS_LAP" "$LAP_SOCK" 'peers[0].transport' 2>/dev/null; }
transport_is() { [ "$(lap_transport)" = "$1" ] && state_is "$NS_LAP" "$LAP_SOCK" 'peers[0].state' established; }
# ping_bg NAME: a ping every 0.1 s through the tunnel, with timestamps.
ping_bg() {
	bg "$1" "$NS_LAP" ping -n -D -i 0.1 -W 1 "$SRV_TUN4"
	PING_PID=$BG_PID
}
# ping_gap NAME: stop it; the longest time between two replies, in s.
ping_gap() {
	stop_pid "$PING_PID" >/dev/null
	forget_pid "$PING_PID"
	"$PY" - "$WORK/$1.log" <<-'PY'
	import re, sys
	t = [float(m.group(1)) for m in (re.match(r"\[(\d+\.\d+)\] \d+ bytes from", l)
	     for l in open(sys.argv[1])) if m]
	print("%.2f" % max((b - a for a, b in zip(t, t[1:])), default=999))
	PY
}

peer_bg target "$NS_LAN" serve "$LAN_HOST:$T_PORT" --echo
wait_listen "$NS_LAN" "$T_PORT" "the -L target"
start_roved

# 1. UDP blocked from the start.
udp_block on
t0=$(now)
start_client laptop
wait_for 5 "a ping through the tunnel" \
	nsx "$NS_LAP" ping -n -c 1 -W 0.3 "$SRV_TUN4" >/dev/null 2>&1 ||
	fail "no ping through the tunnel with UDP blocked"
t_ping=$(now)
out=$(peer_run "$NS_LAP" 10 connect "127.0.0.1:$L_PORT" --send 64K --timeout 5)
t_fwd=$(now)
expect_eq "UDP blocked: forward echoed" $((64 << 10)) "$(jfield "$out" rx)"
log "UDP blocked from the start: ping after $(elapsed "$t0" "$t_ping") s, forward done after $(elapsed "$t0" "$t_fwd") s"
if le "$(elapsed "$t0" "$t_fwd")" 3; then
	ok "UDP blocked: tunnel and forward within 3 s"
else
	fail "UDP blocked: tunnel and forward took $(elapsed "$t0" "$t_fwd") s (limit 3 s)"
fi
expect_eq "UDP blocked: rove's transport" tcp "$(lap_transport)"
expect_eq "UDP blocked: roved's transport for the laptop" tcp "$(srv_get 'peers[name=laptop].transport')"
expect_eq "UDP blocked: moves to TCP" 1 "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].tcp_fallbacks')"

# 2. UDP back: the session returns to QUIC while the ping runs.
ping_bg ping-back
sleep 1
udp_block off
t0=$(now)
wait_for 30 "the session back on QUIC" transport_is quic ||
	fail "the session did not move back to QUIC within 30 s"
log "back on QUIC after $(elapsed "$t0" "$(now)") s"
sleep 1
gap=$(ping_gap ping-back)
log "UDP back: longest ping gap ${gap} s"
if le "$gap" 2; then ok "UDP back: the ping kept going (longest gap $gap s)"; else fail "UDP back: ping gap $gap s"; fi
expect_eq "UDP back: roved's transport for the laptop" quic "$(srv_get 'peers[name=laptop].transport')"
expect_eq "UDP back: moves back to QUIC" 1 "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].quic_returns')"
out=$(peer_run "$NS_LAP" 10 connect "127.0.0.1:$L_PORT" --send 64K --timeout 5)
expect_eq "UDP back: a new forward (on QUIC) echoed" $((64 << 10)) "$(jfield "$out" rx)"

# 3. UDP dropped mid-session.
ping_bg ping-drop
sleep 1
udp_block on
t0=$(now)
wait_for 10 "the session on TCP" transport_is tcp ||
	fail "the session did not move to TCP"
log "on TCP after $(elapsed "$t0" "$(now)") s"
sleep 1
gap=$(ping_gap ping-drop)
log "UDP dropped mid-session: longest ping gap ${gap} s"
if le "$gap" 5; then ok "UDP dropped mid-session: the tunnel was back within 5 s (gap $gap s)"; else fail "UDP dropped mid-session: ping gap $gap s (limit 5 s)"; fi
expect_eq "UDP dropped: moves to TCP" 2 "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].tcp_fallbacks')"
check "UDP dropped: pings over TCP" ping_ok "$NS_LAP" -c 10 -i 0.05 "$SRV_TUN4"

# 3b. While on TCP a network change probes QUIC at once. After 12 s on
# TCP the probes have backed off (2, 4, then 8 s apart, 3 s each): the
# next would come seconds later. UDP comes back and the laptop's routes
# change (as when Wi-Fi returns): QUIC must be back within 2 s.
sleep 12
udp_block off
t0=$(now)
ip -n "$NS_LAP" route add 198.18.99.0/24 dev eth0
wait_for 10 "the session back on QUIC" transport_is quic ||
	fail "the session did not move back to QUIC after the route change"
t_back=$(elapsed "$t0" "$(now)")
log "route change on TCP: back on QUIC after $t_back s"
if le "$t_back" 2; then
	ok "route change on TCP: QUIC probed at once (back after $t_back s)"
else
	fail "route change on TCP: back on QUIC only after $t_back s (limit 2 s)"
fi
ip -n "$NS_LAP" route del 198.18.99.0/24 dev eth0
# Each session after the first is a reconnect: TCP from the start, back
# to QUIC, to TCP, back to QUIC.
expect_eq "handshakes after three transport switches" 4 \
	"$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].handshakes')"
expect_eq "reconnects after three transport switches" 3 \
	"$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].reconnects')"

# 4. UDP refused with an ICMP error (port unreachable, from a firewall in
# front of roved): TCP starts at once, without waiting out the race's
# second.
stop_pid "$LAP_PID"
forget_pid "$LAP_PID"
nsx "$NS_SRV" nft -f - <<NFT || die "cannot load the reject rule"
table inet rove_reject {
	chain in {
		type filter hook input priority 0; policy accept;
		udp dport 4433 reject with icmp type port-unreachable
	}
}
NFT
t0=$(now)
start_client laptop
wait_for 5 "the session on TCP" transport_is tcp ||
	fail "UDP refused: the session did not come up over TCP"
log "UDP refused by ICMP: on TCP after $(elapsed "$t0" "$(now)") s"
if grep -q "nothing listens on the server's UDP port (ICMP port unreachable): trying .*(TLS over TCP) too" "$WORK/laptop.log"; then
	ok "UDP refused: TCP started on the ICMP error"
else
	fail "UDP refused: no 'nothing listens on the server's UDP port' in rove's log"
fi
check "UDP refused: pings over TCP" ping_ok "$NS_LAP" -c 5 -i 0.05 "$SRV_TUN4"
nsx "$NS_SRV" nft delete table inet rove_reject
udp_block on

# 5. Transport = quic never tries TCP; Transport = tcp never sends UDP.
conf_set "$WORK/configs/rove2.conf" Transport quic
tcp0=$(router_count tcp_br)
start_client branch
sleep 4
expect_eq "Transport = quic, UDP blocked: TCP packets from the branch" 0 \
	"$(($(router_count tcp_br) - tcp0))"
if [ "$(sget "$NS_BR" "$BR_SOCK" 'peers[0].state')" = established ]; then
	fail "Transport = quic came up with UDP blocked"
else
	ok "Transport = quic, UDP blocked: not connected"
fi
stop_pid "$BR_PID"
forget_pid "$BR_PID"
udp_block off
conf_set "$WORK/configs/rove2.conf" Transport tcp
udp0=$(router_count udp_br)
start_client branch
wait_established branch || fail "Transport = tcp: the branch does not come up"
expect_eq "Transport = tcp: the branch's transport" tcp "$(sget "$NS_BR" "$BR_SOCK" 'peers[0].transport')"
check "Transport = tcp: branch -> server" ping_ok "$NS_BR" -c 5 -i 0.05 "$SRV_TUN4"
expect_eq "Transport = tcp: UDP packets from the branch at the router" 0 \
	"$(($(router_count udp_br) - udp0))"
fwd_finish laptop branch
