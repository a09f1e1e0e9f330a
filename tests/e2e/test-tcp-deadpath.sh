#!/usr/bin/env bash
# A TLS-over-TCP session whose path goes dead is noticed in seconds, not at
# IdleTimeout (120 s on both sides here): the router (the switch
# namespace's bridge) drops the TCP flow both ways without a word (no
# reset, no ICMP) while a ping and an echo conversation through a
# LocalForward run.
#  1. Transport = tcp (laptop): rove reports the dead path within 7 s
#     (no answer to its PINGs and no TCP acknowledgement for 4 s), and once
#     the router lets the flow through again, reconnects over TCP; the
#     tunnel carries pings again and the forward's conversation carries on
#     (resumed on the new session), byte for byte.
#  2. Transport = auto on TCP because UDP is blocked (branch): the same
#     dead path is reported within 7 s; with UDP let through again (the
#     TCP flow still dropped) rove races QUIC and TCP as at connect and
#     comes back on QUIC.
# Before that, an idle session on a live path stays up through several
# KeepAlive rounds (2 s here, both sides), with no reconnect on either
# side. The times to detect and to recover are logged.
# e2e: light
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
e2e_transport tcp
topo_up

L_PORT=7001
T_PORT=7101
DETECT_MAX=7
peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
client_add "$WORK/configs/rove.conf" "LocalForward = $L_PORT = $LAN_HOST:$T_PORT"
sed -i 's/^Transport = .*/Transport = auto/' "$WORK/configs/rove2.conf"
server_set KeepAlive 2
conf_set "$WORK/configs/rove.conf" KeepAlive 2
# The old behaviour: nothing noticed before IdleTimeout.
expect_eq "rove: IdleTimeout" 120 "$(sed -n 's/^IdleTimeout = //p' "$WORK/configs/rove.conf")"
expect_eq "roved: IdleTimeout" 120 "$(sed -n 's/^IdleTimeout = //p' "$WORK/configs/roved.conf")"

now() { date +%s.%N; }
elapsed() { "$PY" -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }
le() { "$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)" "$1" "$2"; }
transport_of() { sget "$1" "$2" 'peers[0].transport' 2>/dev/null; }
on_transport() { [ "$(transport_of "$1" "$2")" = "$3" ] && state_is "$1" "$2" 'peers[0].state' established; }
# tcp_dead on|off ADDR: the router drops TCP between ADDR and roved's 443.
tcp_dead() {
	forward_rules "$NS_SW" bridge rove_tcpdead "$1" \
		"ip saddr ${2:-} ip daddr $SRV_OUTER tcp dport 443 drop" \
		"ip saddr $SRV_OUTER ip daddr ${2:-} tcp sport 443 drop" ||
		die "cannot drop the TCP flow ($1)"
}
DEAD_LINE="(TLS over TCP) lost: no answer to a PING for"
# detect LOG ADDR WHO: the flow dropped; waits for rove's report of it and
# sets DETECT (seconds).
detect() {
	local t0 t1
	tcp_dead on "$2"
	t0=$(now)
	if wait_for 15 "$3 reports the dead path" grep -qF "$DEAD_LINE" "$1"; then
		t1=$(now)
		DETECT=$(elapsed "$t0" "$t1")
		log "$3: $(grep -F "$DEAD_LINE" "$1" | head -n1)"
		log "$3: dead path detected after $DETECT s"
		if le "$DETECT" "$DETECT_MAX"; then
			ok "$3: dead TCP path noticed within $DETECT_MAX s"
		else
			fail "$3: dead TCP path noticed only after $DETECT s"
		fi
	else
		fail "$3: the dead TCP path is not noticed within 15 s"
		DETECT=
	fi
}

peer_bg target "$NS_LAN" serve "$LAN_HOST:$T_PORT" --echo \
	--results "$WORK/target.json" --accepts "$WORK/accepts"
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up over TCP"
wait_listen "$NS_LAN" "$T_PORT" "the -L target"
wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"
expect_eq "rove: transport" tcp "$(transport_of "$NS_LAP" "$LAP_SOCK")"

# 0. Idle on a live path: each side's keepalive PINGs are answered.
sleep 5
expect_eq "idle: rove's reconnects" 0 "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].reconnects')"
expect_eq "idle: roved's handshakes of the laptop" 1 "$(srv_get 'peers[name=laptop].handshakes')"
if grep -q "peer laptop disconnected" "$WORK/roved.log"; then
	fail "idle: roved dropped the idle laptop"
else
	ok "idle: roved kept the idle laptop"
fi

# 1. Transport = tcp.
peer_bg chat "$NS_LAP" chat "127.0.0.1:$L_PORT" --size 4K --interval 0.1 \
	--duration 12 --timeout 60
CHAT_PID=$BG_PID
bg ping-lap "$NS_LAP" ping -n -i 0.2 -W 1 -c 100 "$SRV_TUN4"
PING_PID=$BG_PID
sleep 2
detect "$WORK/laptop.log" "$LAP_OUTER" laptop
t0=$(now)
tcp_dead off
if wait_for 15 "the laptop back on TCP" on_transport "$NS_LAP" "$LAP_SOCK" tcp &&
   wait_for 10 "a ping through the new session" \
	nsx "$NS_LAP" ping -n -c 1 -W 1 "$SRV_TUN4" >/dev/null 2>&1; then
	log "laptop: tunnel back $(elapsed "$t0" "$(now)") s after the path came back"
	ok "laptop: reconnected over TCP and the tunnel works"
else
	fail "laptop: the tunnel does not come back over TCP"
fi
expect_eq "rove: reconnects" 1 "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].reconnects')"
for i in $(seq 1 40); do
	kill -0 "$CHAT_PID" 2>/dev/null || break
	sleep 1
done
c=$(tail -n1 "$WORK/chat.log")
expect_eq "forward: mismatched rounds" 0 "$(jfield "$c" mismatches)"
expect_eq "forward: errors" '[]' "$(jfield "$c" errors)"
expect_eq "forward: EOF at the end" true "$(jfield "$c" rx_eof)"
expect_eq "forward: target's connections" 1 "$(lines "$WORK/accepts")"
expect_eq "rove: forwards resumed" 1 "$(lap_fc resumed)"
expect_eq "rove: forwards lost" 0 "$(lap_fc resume_lost)"
log "forward: $(jfield "$c" rounds) rounds of 4 KiB, longest $(jfield "$c" longest_ms) ms"
stop_pid "$PING_PID" >/dev/null 2>&1
forget_pid "$PING_PID"

# 2. Transport = auto, on TCP because UDP is blocked.
udp_block on
start_client branch
wait_established branch || die "branch's tunnel does not come up"
wait_for 15 "the branch on TCP" on_transport "$NS_BR" "$BR_SOCK" tcp ||
	fail "the branch is not on TCP with UDP blocked"
bg ping-br "$NS_BR" ping -n -i 0.2 -W 1 -c 100 "$SRV_TUN4"
PING_PID=$BG_PID
sleep 1
detect "$WORK/branch.log" "$BR_OUTER" branch
t0=$(now)
udp_block off
if wait_for 15 "the branch back, on QUIC" on_transport "$NS_BR" "$BR_SOCK" quic &&
   wait_for 10 "a ping through the new session" \
	nsx "$NS_BR" ping -n -c 1 -W 1 "$SRV_TUN4" >/dev/null 2>&1; then
	log "branch: tunnel back on QUIC $(elapsed "$t0" "$(now)") s after UDP came back"
	ok "branch: raced again and came back on QUIC"
else
	fail "branch: does not come back on QUIC"
fi
tcp_dead off
stop_pid "$PING_PID" >/dev/null 2>&1
forget_pid "$PING_PID"
fwd_finish laptop branch
