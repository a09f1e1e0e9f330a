#!/usr/bin/env bash
# ServerPorts: a middlebox that singles out one server port. The router
# drops all UDP to and from roved's port once 2 MB have passed it (one
# nftables quota for every flow, old or new), so a move to a new local
# port alone would be cut too. roved's namespace redirects seven more
# ports to roved's (the nftables rule rove.conf(5) gives), and the client
# has ServerPorts = 4433-4440. While an echo conversation runs through the
# LocalForward and a ping every 10 ms through the tunnel, the cut comes:
# rove must move the same QUIC connection to a new local port and another
# server port of the range (validated, no reconnect, no TCP race), with
# one flow through the redirect, no ping gap of 1.5 s and the
# conversation unbroken. Then the client moves to its second link: the
# migration keeps the server port of the session's path, not Server's
# (which is cut).
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
CUT_BYTES=2000000
LAST=$((PORT + 7))
CHAT_SECS=10
roam_topo_up
roam_configs
server_key "$RCONF_S" ListenTCP "$S_OUT:443"
client_key "$RCONF_C" ServerPorts "$PORT-$LAST"
nsx "$RNS_R" nft -f - <<EOF || die "cannot load the port cutter"
table ip portcut {
	quota cut { over $CUT_BYTES bytes }
	chain through {
		type filter hook forward priority -10; policy accept;
		udp dport $PORT quota name "cut" drop
		udp sport $PORT quota name "cut" drop
	}
}
EOF
nsx "$RNS_S" nft -f - <<EOF || die "cannot load the redirect"
table ip rove {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		udp dport $((PORT + 1))-$LAST redirect to :$PORT
	}
}
EOF
# The flows that came in through the redirect (their original port is
# one of the others).
redirected() {
	nsx "$RNS_S" conntrack -L -p udp 2>/dev/null |
		grep -cE "dport=($(seq -s '|' $((PORT + 1)) "$LAST")) " || true
}
remote_port() { local r; r=$(cget remote); echo "${r##*:}"; }

roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"
roam_echo_up
assert_eq "server port at the start" "$PORT" "$(remote_port)"
assert_eq "flows through the redirect at the start" 0 "$(redirected)"

ping_bg ping $((CHAT_SECS + 2))
bg chat "$RNS_C" "$PY" "$E2E_DIR/fwd-peer.py" chat "127.0.0.1:$FWD_PORT" --size 16K \
	--interval 0.05 --duration "$CHAT_SECS" --timeout 60
CHAT_PID=$BG_PID
wait_exit "$CHAT_PID" $((CHAT_SECS + 30)) || failc "the echo conversation failed or overran"
wait_exit "$PING_PID" 30

chat=$(tail -n 1 "$WORK/chat.log")
log "chat: $chat"
gaps=$(tool gaps "$WORK/ping.log")
log "ping: $gaps"
grep "went silent\|migrat" "$WORK/laptop.log" | sed 's/^/    /'
moved=$(remote_port)
assert_cmp "the router's quota ran out (bytes it dropped on port $PORT)" \
	"$(nsx "$RNS_R" nft list quota ip portcut cut | grep -o 'used [0-9]*' | grep -o '[0-9]*')" -ge "$CUT_BYTES"
assert_eq "rove's moves to a new local port" 1 "$(cget port_moves)"
assert_eq "rove's migrations" 1 "$(cget migrations)"
if [ "$moved" -gt "$PORT" ] && [ "$moved" -le "$LAST" ]; then
	pass "the session moved to server port $moved, another of $PORT-$LAST"
else
	failc "the session is on server port $moved, not another of $PORT-$LAST"
fi
assert "the log names the new server port" \
	grep -q "the path went silent: moving to a new local port, .*, to $S_OUT:$moved\$" "$WORK/laptop.log"
assert_eq "flows through the redirect" 1 "$(redirected)"
assert_cmp "longest ping gap (ms)" "$(jf "$gaps" max_gap_ms)" -lt 1500
assert_eq "echo rounds that came back different" 0 "$(jf "$chat" mismatches)"
assert_eq "echo conversation errors" '[]' "$(jf "$chat" errors)"
assert_eq "echo conversation ended with EOF" true "$(jf "$chat" rx_eof)"
assert_cmp "echo rounds" "$(jf "$chat" rounds)" -ge $((CHAT_SECS * 10))
assert_eq "connections the echo server accepted" 1 "$(wc -l <"$WORK/accepts")"
assert_eq "transport" quic "$(cget transport)"
assert_eq "moves to TCP" 0 "$(cget tcp_fallbacks)"
roam_assert_no_tcp_race
assert_eq "client's handshakes" 1 "$(cget handshakes)"
assert_eq "roved's handshakes" 1 "$(sgetp handshakes)"

# The laptop moves to link B: a migration for a route change goes to the
# server's end of the session's path, the port that works.
roam_to_link_b || die "cannot move the laptop to link B"
if wait_for 5 "the session to leave from link B" client_local_is "$C_B"; then
	pass "the session moved to link B"
else
	failc "the session did not move to link B (it leaves from $(local_ip))"
fi
if nsx "$RNS_C" ping -c 3 -i 0.2 -W 1 "$S_TUN" >/dev/null; then
	pass "the tunnel answers from link B"
else
	failc "no ping answer from link B"
fi
assert_eq "server port after the move to link B" "$moved" "$(remote_port)"
assert_eq "rove's migrations after the move to link B" 2 "$(cget migrations)"
assert_eq "rove's moves to a new local port after the move to link B" 1 "$(cget port_moves)"
assert_eq "client's handshakes after the move to link B" 1 "$(cget handshakes)"
roam_stop_all
roam_finish
