#!/usr/bin/env bash
# A forward opened by a client resuming with a ticket travels in 0-RTT,
# and its replay does nothing:
#
#   rove (laptop) -- NAT router, 25 ms each way -- roved -- LAN host
#   LocalForward 127.0.0.1:7001 -> LAN:7001, an echo server that logs
#   every connection it accepts
#
# 1. With a ticket, a connection made as rove starts gets its 1000 bytes
#    echoed; both ends count the forward as opened in 0-RTT, and roved's
#    first flight (captured at roved) holds 0-RTT packets.
# 2. That flight is sent again three times: while the connection lives,
#    after roved forgot it (the client restarted), after a roved restart.
#    The target accepts no second connection and echoes no byte twice;
#    roved's forward counters do not move. And once to another member of
#    roved's KeyDir group (ServerID 02, forwarding only, its own port),
#    whose register has never seen the ticket: it takes the ticket and
#    the 0-RTT forward, but dials nothing, as the handshake never ends.
# 3. roved's ticket key replaced (0-RTT rejected): the forward still
#    completes, sent again in 1-RTT; nothing counts as 0-RTT.
# 4. ZeroRTT = no on the client: the forward completes after the
#    handshake, nothing in 0-RTT.
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up 25
roam_configs
# A KeyDir group: roved is member 01; member 02 (Tun = none, port 4434)
# shares its keys and peers.
PORT_B=4434
sed -i "s|^StateDir = .*|&\nKeyDir = $WORK/group-keys\nServerID = 01|" "$RCONF_S"
RCONF_B=$WORK/configs/roved-b.conf
awk -v port="$S_OUT:$PORT_B" -v work="$WORK" '
	/^\[/ { server = ($0 == "[Server]") }
	server && /^Listen *=/ { print "Listen = " port; next }
	server && /^Tun *=/ { print "Tun = none"; next }
	/^Address *=/ { next }
	server && /^(MTU|Offload) *=/ { next }
	server && /^StateDir *=/ { print "StateDir = " work "/state-b"; next }
	server && /^ServerID *=/ { print "ServerID = 02"; next }
	server && /^ControlSocket *=/ { print "ControlSocket = " work "/run-b/roved.sock"; next }
	/^AllowedIPs *=/ { next }
	{ print }' "$RCONF_S" >"$RCONF_B"
SOCK_B=$WORK/run-b/roved.sock
MSG=1000
peer_bg() {
	local name=$1 ns=$2
	shift 2
	bg "$name" "$ns" "$PY" "$E2E_DIR/fwd-peer.py" "$@"
}
peer_bg echo "$RNS_L" serve "$LAN:$FWD_PORT" --echo --accepts "$WORK/accepts" \
	--results "$WORK/echoed"
wait_for 10 "the echo target" tcp_port_open "$RNS_L" "$FWD_PORT" || die "no echo target"
roam_start_roved
bg roved-b "$RNS_S" "$BUILD/roved" -f -c "$RCONF_B"
ROVED_B_PID=$BG_PID
wait_for 10 "member 02's control socket" status_ok "$RNS_S" "$SOCK_B" ||
	die "member 02 did not come up"
roam_start_client
roam_wait_up || die "the tunnel does not come up"
have_ticket() { compgen -G "$LAP_STATE/session-*" >/dev/null; }
wait_for 10 "the client's session ticket" have_ticket || die "no session ticket in $LAP_STATE"

accepts() { if [ -f "$WORK/accepts" ]; then wc -l <"$WORK/accepts"; else echo 0; fi; }
# Bytes the target echoed, over the connections that have ended.
echoed() {
	"$PY" -c 'import json, sys
print(sum(json.loads(l)["echoed"] for l in open(sys.argv[1])))' "$WORK/echoed" 2>/dev/null || echo 0
}
stop_client() {
	local rc=0
	stop_pid "$LAP_PID" || rc=$?
	forget_pid "$LAP_PID"
	assert_eq "rove exit status after SIGTERM" 0 "$rc"
	mv "$WORK/laptop.log" "$WORK/laptop-$1.log"
}
sfc() { sgetp "forward_counters.$1"; }
cfc() { cget "forward_counters.$1"; }
# first_forward NAME: the first connection through the forward, made while
# rove starts; its result (JSON) in $FIRST.
first_forward() {
	bg "first-$1" "$RNS_C" "$PY" "$E2E_DIR/fwd-peer.py" first "127.0.0.1:$FWD_PORT" \
		--size "$MSG" --timeout 20 --ready-file "$WORK/first-$1.ready"
	local probe=$BG_PID
	# Trying already when rove starts: its start-up is not to be missed.
	wait_for 10 "the probe" test -e "$WORK/first-$1.ready" || die "the probe does not start"
	roam_start_client
	wait_exit "$probe" 25
	FIRST=$(tail -n 1 "$WORK/first-$1.log")
	log "first forward ($1): $FIRST"
	assert_eq "$1: the first forward's $MSG bytes came back exactly" 1 "$(jf "$FIRST" ok)"
}
echoed_is() { [ "$(echoed)" = "$1" ]; }

# 1. 0-RTT.
stop_client plain
wait_for 5 "roved to see the client leave" server_state_is closed
tool_bg sniff "$RNS_S" sniff eth0 "$PORT" "$WORK/capture" --timeout 200
wait_for 10 "the capture" ready_in "$WORK/sniff.log" || die "the capture does not start"
t_start=$(now_ns)
first_forward 0rtt
wait_for 10 "the 0-RTT reconnect" client_hs_is 1 || die "rove did not connect"
wait_for 5 "the target to finish the connection" echoed_is "$MSG"
assert_eq "client's 0-RTT accepted" 1 "$(cget zero_rtt.accepted)"
assert_eq "rove: forwards opened in 0-RTT" 1 "$(cfc opened_0rtt)"
assert_eq "roved: forward requests served from 0-RTT" 1 "$(sfc opened_0rtt)"
assert_eq "connections the target accepted" 1 "$(accepts)"
assert_eq "bytes the target echoed" "$MSG" "$(echoed)"
srv_ref=$(status_try "$RNS_S" "$ROVED_SOCK")

# 2. Replays.
replay() {
	nsx "$RNS_R" "$PY" "$ROAM_TOOL" replay "$WORK/capture" "$S_OUT:$PORT" \
		--after "$t_start" --wait 0.3 >"$WORK/replay-$1.json"
	sleep 0.3
	log "replay $1: $(cat "$WORK/replay-$1.json")"
	assert_eq "replay $1: connections the target accepted" 1 "$(accepts)"
	assert_eq "replay $1: bytes the target echoed" "$MSG" "$(echoed)"
}
replay live
# Member 02 next, while the ticket's age still passes (wolfSSL allows
# about 10 s of difference from the client's claim).
nsx "$RNS_R" "$PY" "$ROAM_TOOL" replay "$WORK/capture" "$S_OUT:$PORT_B" \
	--after "$t_start" --to "$S_OUT:$PORT" --wait 0.3 >"$WORK/replay-member.json"
sleep 1
log "replay to member 02: $(cat "$WORK/replay-member.json")"
bget() { status_try "$RNS_S" "$SOCK_B" | jget "$1" 2>/dev/null; }
assert_eq "replay to member 02: it took the ticket as another member's" 1 \
	"$(bget tickets.group_resumed)"
assert_eq "replay to member 02: the 0-RTT forward reached it" 1 \
	"$(bget 'peers[name=laptop].forward_counters.opened_0rtt')"
assert_eq "replay to member 02: connections the target accepted" 1 "$(accepts)"
assert_eq "replay to member 02: bytes the target echoed" "$MSG" "$(echoed)"
assert_eq "replay to member 02: its handshakes completed" 0 \
	"$(bget 'peers[name=laptop].handshakes')"
assert_eq "replay live: roved's forwards opened" "$(jf "$srv_ref" 'peers[name=laptop].forward_counters.opened')" "$(sfc opened)"
assert_eq "replay live: roved's forwards from 0-RTT" 1 "$(sfc opened_0rtt)"
kill -KILL "$LAP_PID"; wait "$LAP_PID" 2>/dev/null; forget_pid "$LAP_PID"
mv "$WORK/laptop.log" "$WORK/laptop-killed.log"
roam_start_client
restarted() { [ "$(sgetp handshakes)" = 3 ] && server_state_is established; }
wait_for 10 "roved to take the restarted client" restarted || die "the restarted client does not connect"
srv_before=$(status_try "$RNS_S" "$ROVED_SOCK")
replay spent-ticket
for k in opened opened_0rtt; do
	assert_eq "replay spent-ticket: roved's forward counter $k" \
		"$(jf "$srv_before" "peers[name=laptop].forward_counters.$k")" "$(sfc $k)"
done
assert_eq "replay spent-ticket: roved's handshakes" 3 "$(sgetp handshakes)"
stop_client restarted
rc=0
stop_pid "$ROVED_PID" || rc=$?
forget_pid "$ROVED_PID"
assert_eq "roved exit status after SIGTERM" 0 "$rc"
roam_start_roved
replay restarted
assert_eq "replay restarted: roved's handshakes" 0 "$(sgetp handshakes)"
assert_eq "replay restarted: roved's forwards from 0-RTT" 0 "$(sfc opened_0rtt)"
assert_eq "replay restarted: roved's forwards opened" 0 "$(sfc opened)"
flight=$(tool flight "$WORK/capture" --to "$S_OUT:$PORT" --after "$t_start")
log "captured first flight: $flight"
assert_cmp "0-RTT packets in the captured flight" "$(jf "$flight" zero_rtt)" -ge 1

# 3. 0-RTT rejected: roved's ticket keys are new.
rc=0
stop_pid "$ROVED_PID" || rc=$?
forget_pid "$ROVED_PID"
assert_eq "roved exit status after SIGTERM" 0 "$rc"
rm -f "$ROVED_STATE/ticket.key" "$WORK/group-keys/ticket.key"
roam_start_roved
have_ticket || die "the client has no ticket to try"
first_forward rejected
wait_for 10 "the reconnect" client_hs_is 1 || die "rove did not connect"
wait_for 5 "the target to finish the connection" echoed_is $((2 * MSG))
assert_eq "rejected: client's 0-RTT rejected" 1 "$(cget zero_rtt.rejected)"
assert_eq "rejected: rove's forwards in 0-RTT" 0 "$(cfc opened_0rtt)"
assert_eq "rejected: rove's forwards opened" 1 "$(cfc opened)"
assert_eq "rejected: roved's forwards from 0-RTT" 0 "$(sfc opened_0rtt)"
assert_eq "rejected: connections the target accepted" 2 "$(accepts)"
assert_eq "rejected: bytes the target echoed" $((2 * MSG)) "$(echoed)"
stop_client rejected

# 4. ZeroRTT = no.
client_key "$RCONF_C" ZeroRTT no
first_forward no0rtt
wait_for 10 "the reconnect" client_hs_is 1 || die "rove did not connect"
wait_for 5 "the target to finish the connection" echoed_is $((3 * MSG))
assert_eq "ZeroRTT = no: 0-RTT attempted" 0 "$(cget zero_rtt.attempted)"
assert_eq "ZeroRTT = no: rove's forwards in 0-RTT" 0 "$(cfc opened_0rtt)"
assert_eq "ZeroRTT = no: roved's forwards from 0-RTT" 0 "$(sfc opened_0rtt)"
assert_eq "ZeroRTT = no: connections the target accepted" 3 "$(accepts)"

roam_stop_all
for f in "$WORK"/laptop-*.log; do
	sanitizer_clean "$f" "$(basename "$f" .log)"
done
roam_finish
