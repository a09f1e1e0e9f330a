#!/usr/bin/env bash
# roved dies (SIGKILL) and comes back: the client learns it from a
# stateless reset (roved keeps its reset secret in StateDir), reconnects at
# once with 0-RTT (its session ticket in StateDir, roved's ticket keys in
# its StateDir), and its first inner packets ride the 0-RTT flight. The
# router delays each direction by 25 ms (50 ms round trip), so the
# handshake lasts long enough for pings sent every 10 ms to need 0-RTT.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up 25
roam_configs
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"

# What StateDir holds, private: roved's keys and register, the client's
# session ticket (written when the server's NewSessionTicket arrived).
have_ticket() { compgen -G "$LAP_STATE/session-*" >/dev/null; }
wait_for 10 "the client's session ticket" have_ticket || failc "no session ticket in $LAP_STATE"
for f in "$ROVED_STATE/reset.key" "$ROVED_STATE/ticket.key" "$ROVED_STATE/tickets" \
	"$LAP_STATE"/session-*; do
	assert_eq "mode of ${f#"$WORK"/}" 600 "$(stat -c %a "$f" 2>/dev/null || echo missing)"
done
assert_eq "client's 0-RTT attempts on the first connection" 0 "$(cget zero_rtt.attempted)"

tool_bg sniff "$RNS_S" sniff eth0 "$PORT" "$WORK/capture" --timeout 120
wait_for 10 "the capture" ready_in "$WORK/sniff.log" || die "the capture does not start"
ping_bg ping 8
sleep 1.5

t_kill=$(now_ns)
roam_kill_roved
roam_start_roved
t_ready=$(now_ns)
restart_ms=$(ms_between "$t_kill" "$t_ready")
log "roved was back $restart_ms ms after SIGKILL"
if wait_for 15 "the client's second handshake" client_hs_is 2; then
	pass "client reconnected"
else
	failc "client did not reconnect (state $(cget state), handshakes $(cget handshakes))"
fi
wait_exit "$PING_PID" 30
gaps=$(tool gaps "$WORK/ping.log")
log "ping: $gaps"

assert_eq "client's stateless resets received" 1 "$(cget stateless_resets)"
assert_eq "client's reconnects" 1 "$(cget reconnects)"
assert_eq "client's 0-RTT attempts" 1 "$(cget zero_rtt.attempted)"
assert_eq "client's 0-RTT accepted" 1 "$(cget zero_rtt.accepted)"
assert_eq "client's 0-RTT rejected" 0 "$(cget zero_rtt.rejected)"
assert_eq "new roved: handshakes with the laptop" 1 "$(sgetp handshakes)"
assert_eq "new roved: connections with 0-RTT accepted" 1 "$(sgetp zero_rtt.accepted)"
assert_cmp "new roved: packets received from the laptop" "$(sgetp rx_packets)" -gt 0
if grep -q 'stateless reset' "$WORK/laptop.log"; then
	pass "client log names the stateless reset"
else
	failc "client log does not mention the stateless reset"
fi

# The new connection's first flight, as roved's interface saw it: 0-RTT
# packets big enough for an 84-byte ping sent before any answer could have
# come back, i.e. within one round trip of the Initial.
flight=$(tool flight "$WORK/capture" --to "$S_OUT:$PORT" --after "$t_kill")
log "first flight: $flight"
assert_cmp "0-RTT packets in the reconnect's first flight" "$(jf "$flight" zero_rtt)" -ge 1
assert_cmp "largest 0-RTT packet (bytes)" "$(jf "$flight" zero_rtt_max_len)" -ge 100
fi_ns=$(jf "$flight" first_initial_ns)
fz_ns=$(jf "$flight" first_zero_rtt_ns)
if [ "$fz_ns" != null ] && [ "$fi_ns" != null ]; then
	assert_cmp "first 0-RTT packet after the Initial (ms)" \
		"$(ms_between "$fi_ns" "$fz_ns")" -lt 50
else
	failc "no Initial or 0-RTT packet in the capture"
fi
assert_cmp "longest ping gap (ms; restart took $restart_ms ms)" \
	"$(jf "$gaps" max_gap_ms)" -le $((restart_ms + 1000))
# A clean stop of the client tells roved at once.
roam_stop_all close
roam_finish
