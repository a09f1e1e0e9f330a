#!/usr/bin/env bash
# UDP comes back while Transport = auto's TCP attempt is still under way.
# The router drops all UDP and the TCP SYNs to roved's port 443: after
# 1 s of silence rove asks from new local ports (no answer), after 2 s it
# races TLS over TCP, whose SYN goes unanswered. Then UDP passes again:
# QUIC answers (the old path or a new one) and the tunnel with it. Only
# then are the SYNs let through, so the TCP attempt's next SYN would get
# it a session at roved, which would replace the QUIC one there, whatever
# rove decided on its side. The attempt must go the moment QUIC answers: one session,
# on QUIC, from start to end, with the echo conversation through its
# LocalForward unbroken.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up
roam_configs
server_key "$RCONF_S" ListenTCP "$S_OUT:443"
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"
roam_echo_up

NOSYN='tcp dport 443 tcp flags & (syn | ack) == syn drop'
raced() { grep -q "(TLS over TCP) too" "$WORK/laptop.log"; }

bg chat "$RNS_C" "$PY" "$E2E_DIR/fwd-peer.py" chat "127.0.0.1:$FWD_PORT" --size 16K \
	--interval 0.05 --duration 22 --timeout 90
CHAT_PID=$BG_PID
sleep 2
roam_drop block on $'meta l4proto udp drop\n'"$NOSYN" || die "cannot block UDP"
log "UDP and TCP SYNs dropped"
if wait_for 6 "the TCP race" raced; then
	pass "rove raced TLS over TCP after the silence"
else
	failc "rove never raced TLS over TCP"
fi
roam_drop nosyn on "$NOSYN" || die "cannot drop TCP SYNs"
roam_drop block off
log "UDP passes again (TCP SYNs still dropped)"
# Over QUIC: the TCP attempt has no connection yet.
if wait_for 10 "the tunnel answering over QUIC" quiet_ping "$RNS_C" "$S_TUN"; then
	pass "the tunnel answers over QUIC again"
else
	failc "the tunnel does not answer after UDP came back"
fi
sleep 0.6
roam_drop nosyn off
log "TCP SYNs pass again"
# The SYN of an attempt still under way goes again 1, 3 and 7 s after
# the first: wait for them all.
wait_exit "$CHAT_PID" 60 || failc "the echo conversation failed or overran"
chat=$(tail -n 1 "$WORK/chat.log")
log "chat: $chat"
assert_eq "log lines \"the TLS over TCP attempt is dropped\"" 1 \
	"$(grep -c "QUIC answers again: the TLS over TCP attempt is dropped" "$WORK/laptop.log")"
# Dropped SYNs leave no conntrack entry: one is a TCP connection made.
assert_eq "TCP connections to roved's port 443 through the router" 0 \
	"$(nsx "$RNS_R" conntrack -L -p tcp --dport 443 2>/dev/null | grep -c .)"
assert_eq "transport" quic "$(cget transport)"
assert_eq "moves to TCP" 0 "$(cget tcp_fallbacks)"
assert_eq "client reconnects" 0 "$(cget reconnects)"
assert_eq "client's handshakes" 1 "$(cget handshakes)"
assert_eq "roved's handshakes" 1 "$(sgetp handshakes)"
assert_eq "echo rounds that came back different" 0 "$(jf "$chat" mismatches)"
assert_eq "echo conversation errors" '[]' "$(jf "$chat" errors)"
assert_eq "echo conversation ended with EOF" true "$(jf "$chat" rx_eof)"
assert_eq "connections the echo server accepted" 1 "$(wc -l <"$WORK/accepts")"
assert_eq "forwards reset" 0 "$(cget forward_counters.reset)"
roam_stop_all
roam_finish
