#!/usr/bin/env bash
# Forwarded TCP connections outlive their QUIC connection (forward IDs and
# RESUME, docs/PROTOCOL.md). Two echo conversations run (64 KiB there and
# back every 50 ms, each checked byte for byte): one through a
# LocalForward (laptop -> LAN host), one through a RemoteForward (roved's
# host -> laptop). Meanwhile:
#  1. the router drops UDP: the session moves to TLS over TCP, and both
#     forwards carry on over it;
#  2. UDP comes back: the session returns to QUIC, the forwards with it;
#  3. rove is stopped (SIGSTOP) past the idle timeout: both ends give the
#     connection up, and on waking rove reconnects, the forward with it.
# Every round must come back whole and equal, the connections must end
# with EOF and no error, each target must have accepted exactly one
# connection per conversation, and the counters say how many forwards were
# resumed (and none lost).
# e2e: light
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
e2e_transport auto
topo_up

L_PORT=7001          # rove's -L listener (laptop, 127.0.0.1)
T_PORT=7101          # its target on the LAN host
R_PORT=2222          # roved's -R listener (reached from roved's host)
RT_PORT=7201         # its target in the laptop namespace
CHUNK=64K
peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
peer_set laptop AllowRemoteForward "$R_PORT"
# Short enough that case 3 outlasts it; the forwards wait as long again.
server_set IdleTimeout 6
server_set KeepAlive 2
conf_set "$WORK/configs/rove.conf" IdleTimeout 6
conf_set "$WORK/configs/rove.conf" KeepAlive 2
client_add "$WORK/configs/rove.conf" \
	"LocalForward = $L_PORT = $LAN_HOST:$T_PORT" \
	"RemoteForward = $R_PORT = 127.0.0.1:$RT_PORT"

lap_transport() { sget "$NS_LAP" "$LAP_SOCK" 'peers[0].transport' 2>/dev/null; }
transport_is() { [ "$(lap_transport)" = "$1" ] && state_is "$NS_LAP" "$LAP_SOCK" 'peers[0].state' established; }

peer_bg target-l "$NS_LAN" serve "$LAN_HOST:$T_PORT" --echo \
	--results "$WORK/target-l.json" --accepts "$WORK/accepts-l"
peer_bg target-r "$NS_LAP" serve "127.0.0.1:$RT_PORT" --echo \
	--results "$WORK/target-r.json" --accepts "$WORK/accepts-r"
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
wait_listen "$NS_LAN" "$T_PORT" "the -L target"
wait_listen "$NS_LAP" "$RT_PORT" "the -R target"
wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"
wait_listen "$NS_SRV" "$R_PORT" "roved's RemoteForward"
expect_eq "the session starts on QUIC" quic "$(lap_transport)"

# chats_bg TAG SECS [r]: an echo conversation through the LocalForward
# (and with r, one through the RemoteForward too) for SECS seconds.
chats_bg() {
	peer_bg "chat-l$1" "$NS_LAP" chat "127.0.0.1:$L_PORT" --size "$CHUNK" \
		--interval 0.05 --duration "$2" --timeout 90
	CL_PID=$BG_PID
	CR_PID=
	if [ "${3:-}" = r ]; then
		peer_bg "chat-r$1" "$NS_SRV" chat "127.0.0.1:$R_PORT" --size "$CHUNK" \
			--interval 0.05 --duration "$2" --timeout 90
		CR_PID=$BG_PID
	fi
}
# check_chat WHAT LOG: every round came back equal, EOF, no error.
check_chat() {
	local c
	c=$(tail -n1 "$2")
	expect_eq "$1: mismatched rounds" 0 "$(jfield "$c" mismatches)"
	expect_eq "$1: errors" '[]' "$(jfield "$c" errors)"
	expect_eq "$1: EOF at the end" true "$(jfield "$c" rx_eof)"
	if [ "$(jfield "$c" rounds)" -gt 20 ] 2>/dev/null; then
		ok "$1: $(jfield "$c" rounds) rounds"
	else
		fail "$1: only $(jfield "$c" rounds) rounds"
	fi
	log "$1: $(jfield "$c" rounds) rounds of 64 KiB each way, longest $(jfield "$c" longest_ms) ms"
}
wait_pid() {
	local i
	for i in $(seq 1 "$2"); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 1
	done
	return 1
}

# 1 and 2: UDP dropped, then back, while both conversations run.
chats_bg 1 16 r
sleep 3
udp_block on
wait_for 15 "the session on TCP" transport_is tcp ||
	fail "the session did not move to TCP"
log "on TLS over TCP"
sleep 3
udp_block off
# A route change on the laptop (Wi-Fi back) has rove probe QUIC at once.
ip -n "$NS_LAP" route add 198.18.99.0/24 dev eth0
wait_for 15 "the session back on QUIC" transport_is quic ||
	fail "the session did not return to QUIC"
log "back on QUIC"
ip -n "$NS_LAP" route del 198.18.99.0/24 dev eth0
wait_pid "$CL_PID" 60 || fail "the LocalForward conversation did not end"
wait_pid "$CR_PID" 60 || fail "the RemoteForward conversation did not end"
check_chat "LocalForward across two transport switches" "$WORK/chat-l1.log"
check_chat "RemoteForward across two transport switches" "$WORK/chat-r1.log"
expect_eq "-L target: connections accepted" 1 "$(lines "$WORK/accepts-l")"
expect_eq "-R target: connections accepted" 1 "$(lines "$WORK/accepts-r")"
expect_eq "rove: moves to TCP" 1 "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].tcp_fallbacks')"
expect_eq "rove: returns to QUIC" 1 "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].quic_returns')"
# Two forwards, two moves each; on each side one of the two was opened
# there (it asked) and one accepted (it answered): both count.
expect_eq "rove: forwards resumed" 4 "$(lap_fc resumed)"
expect_eq "roved: forwards resumed" 4 "$(srv_fc resumed)"
expect_eq "rove: forwards lost" 0 "$(lap_fc resume_lost)"
expect_eq "roved: forwards lost" 0 "$(srv_fc resume_lost)"
expect_eq "rove: forwards reset" 0 "$(lap_fc reset)"
expect_eq "roved: forwards reset" 0 "$(srv_fc reset)"

# 3. rove stopped past the idle timeout (6 s): roved gives the connection
# up, rove does too on waking, and reconnects; the forward waits for it.
chats_bg 3 16
sleep 3
kill -STOP "$LAP_PID"
sleep 9
kill -CONT "$LAP_PID"
wait_pid "$CL_PID" 60 || fail "the LocalForward conversation did not end after the stop"
check_chat "LocalForward across a reconnect" "$WORK/chat-l3.log"
expect_eq "-L target: connections accepted" 2 "$(lines "$WORK/accepts-l")"
expect_eq "rove: reconnects" 3 "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].reconnects')"
expect_eq "rove: forwards resumed" 5 "$(lap_fc resumed)"
expect_eq "roved: forwards resumed" 5 "$(srv_fc resumed)"
expect_eq "rove: forwards lost" 0 "$(lap_fc resume_lost)"
expect_eq "roved: forwards lost" 0 "$(srv_fc resume_lost)"
if grep -q "peer laptop disconnected: idle" "$WORK/roved.log" ||
   grep -q "peer laptop disconnected" "$WORK/roved.log"; then
	ok "roved gave the stopped connection up"
else
	fail "roved never gave the stopped connection up"
fi
fwd_finish
