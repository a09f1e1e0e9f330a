#!/usr/bin/env bash
# ZeroRTT = no: after roved is killed and restarted, the client still learns
# it from a stateless reset and reconnects, in 1-RTT: it attempts no 0-RTT
# and no 0-RTT packet crosses the wire. Three ways: ZeroRTT = no on both
# sides, on the client only, and on the server only (the client then holds
# a ticket that allows no early data). The router delays each direction by
# 25 ms, as in test-roam-restart.sh, where the same traffic does use 0-RTT.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up 25
roam_configs
tool_bg sniff "$RNS_S" sniff eth0 "$PORT" "$WORK/capture" --timeout 250
wait_for 10 "the capture" ready_in "$WORK/sniff.log" || die "the capture does not start"

# phase NAME SERVER_0RTT CLIENT_0RTT: fresh roved and rove with these
# settings, then roved killed and restarted under ping traffic.
phase() {
	local name=$1 t_kill flight rc
	server_key "$RCONF_S" ZeroRTT "$2"
	client_key "$RCONF_C" ZeroRTT "$3"
	# Each phase starts without a ticket from the one before.
	rm -f "$LAP_STATE"/session-*
	roam_start_roved
	roam_start_client
	roam_wait_up || die "$name: the tunnel does not come up"
	ping_bg "ping-$name" 5
	sleep 1
	t_kill=$(now_ns)
	roam_kill_roved
	roam_start_roved
	if wait_for 15 "$name: the client's second handshake" client_hs_is 2; then
		pass "$name: client reconnected"
	else
		failc "$name: client did not reconnect (state $(cget state))"
	fi
	wait_exit "$PING_PID" 20
	log "$name: ping $(tool gaps "$WORK/ping-$name.log")"
	assert "$name: ping through the new connection" \
		ping_ok "$RNS_C" -c 3 -i 0.05 "$S_TUN"
	assert_eq "$name: client's stateless resets received" 1 "$(cget stateless_resets)"
	assert_eq "$name: client's 0-RTT attempts" 0 "$(cget zero_rtt.attempted)"
	assert_eq "$name: client's 0-RTT accepted" 0 "$(cget zero_rtt.accepted)"
	assert_eq "$name: client's 0-RTT rejected" 0 "$(cget zero_rtt.rejected)"
	assert_eq "$name: roved's handshakes" 1 "$(sgetp handshakes)"
	assert_eq "$name: roved's connections with 0-RTT accepted" 0 "$(sgetp zero_rtt.accepted)"
	flight=$(tool flight "$WORK/capture" --to "$S_OUT:$PORT" --after "$t_kill")
	log "$name: reconnect flight $flight"
	assert_cmp "$name: Initial packets of the reconnect" "$(jf "$flight" counts.initial)" -ge 1
	assert_eq "$name: 0-RTT packets on the wire" 0 "$(jf "$flight" counts.zero_rtt)"
	rc=0
	stop_pid "$LAP_PID" || rc=$?
	forget_pid "$LAP_PID"
	assert_eq "$name: rove exit status after SIGTERM" 0 "$rc"
	mv "$WORK/laptop.log" "$WORK/laptop-$name.log"
	rc=0
	stop_pid "$ROVED_PID" || rc=$?
	forget_pid "$ROVED_PID"
	assert_eq "$name: roved exit status after SIGTERM" 0 "$rc"
}

phase both-off no no
phase client-off yes no
phase server-off no yes
for f in "$WORK"/laptop-*.log "$WORK"/roved*.log; do
	sanitizer_clean "$f" "$(basename "$f" .log)"
done
roam_finish
