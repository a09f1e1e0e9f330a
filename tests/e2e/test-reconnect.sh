#!/usr/bin/env bash
# Liveness: clean shutdown of both programs (exit 0, TUN and routes gone);
# the client's reconnection, with 0-RTT, when roved restarts cleanly, when
# it is killed (found out by a stateless reset from the new roved, whose
# reset key persists in StateDir) and when the path goes silent for longer
# than the idle timeout.
# e2e: light
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
topo_up
C=$WORK/configs
# The client pings every second and gives up after 4 s of silence, so the
# blackhole below is noticed in seconds (the idle timeout both sides use is
# the smaller of the two).
conf_set "$C/rove.conf" KeepAlive 1
conf_set "$C/rove.conf" IdleTimeout 4

start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
check "laptop -> server before the restarts" ping_ok "$NS_LAP" -c 5 -i 0.05 "$SRV_TUN4"

lap() { sget "$NS_LAP" "$LAP_SOCK" "peers[0].$1" 2>/dev/null; }
lap_not_established() { [ "$(lap state)" != established ]; }
# lap_handshakes N: the laptop is established on its Nth handshake.
lap_handshakes() { [ "$(lap state)" = established ] && [ "$(lap handshakes)" = "$1" ]; }
srv_no_tun() { ! ip -n "$NS_SRV" link show rove0 >/dev/null 2>&1; }
# lap_alive: the laptop's rove still runs; the rest makes no sense otherwise.
lap_alive() {
	kill -0 "$LAP_PID" 2>/dev/null ||
		die "rove (laptop) exited: $(tail -n 1 "$WORK/laptop.log")"
}

# 1. roved stops cleanly: it exits 0 and removes its TUN; the client notices
# at once, keeps its own TUN while it tries again, and resumes with 0-RTT.
rc=0; stop_pid "$ROVED_PID" || rc=$?
forget_pid "$ROVED_PID"
expect_eq "roved exit status after SIGTERM" 0 "$rc"
check "roved removed rove0" srv_no_tun
if wait_for 5 "the laptop to notice the server is gone" lap_not_established; then
	ok "laptop noticed the clean shutdown (state $(lap state))"
else
	fail "laptop still says established 5 s after roved exited"
fi
lap_alive
ok "laptop keeps running"
if ip -n "$NS_LAP" link show rove0 >/dev/null 2>&1; then
	ok "laptop keeps rove0 while reconnecting"
else
	fail "laptop removed rove0 while reconnecting"
fi
mv "$WORK/roved.log" "$WORK/roved-1.log"

start_roved
if wait_for 20 "the laptop to reconnect" lap_handshakes 2; then
	ok "laptop reconnected after a clean restart"
else
	lap_alive
	fail "laptop did not reconnect within 20 s of roved's restart"
fi
expect_eq "0-RTT accepted after a clean restart" 1 "$(lap zero_rtt.accepted)"
check "laptop -> server after a clean restart" ping_ok "$NS_LAP" -c 5 -i 0.05 "$SRV_TUN4"

# 2. roved dies without a word (SIGKILL) and comes back at once. The
# client's next packet draws a stateless reset from the new roved, so it
# reconnects without waiting for its idle timeout.
kill -KILL "$ROVED_PID"
wait "$ROVED_PID" 2>/dev/null
forget_pid "$ROVED_PID"
mv "$WORK/roved.log" "$WORK/roved-2.log"
# The kernel deletes a TUN device when its last file descriptor closes.
if wait_for 5 "rove0 to vanish with the killed roved" srv_no_tun; then
	ok "rove0 vanished with the killed roved"
else
	fail "rove0 still exists after roved was killed"
fi
resets0=$(lap stateless_resets)
start_roved
if wait_for 15 "the laptop to reconnect after roved was killed" lap_handshakes 3; then
	ok "laptop reconnected after roved was killed"
else
	lap_alive
	fail "laptop did not reconnect within 15 s after roved was killed and restarted"
fi
expect_eq "stateless resets the laptop received" $((resets0 + 1)) "$(lap stateless_resets)"
expect_eq "0-RTT accepted after roved was killed" 2 "$(lap zero_rtt.accepted)"
check "laptop -> server after roved was killed" ping_ok "$NS_LAP" -c 5 -i 0.05 "$SRV_TUN4"

# 3. The path goes silent for longer than the idle timeout (every packet to
# and from roved's port dropped in the server's namespace), then comes back.
server_blackhole on
if wait_for 10 "the laptop to give up on the silent path" lap_not_established; then
	ok "laptop noticed the silent path (state $(lap state))"
else
	fail "laptop still says established 10 s into a blackhole (IdleTimeout 4)"
fi
if wait_for 10 "roved to drop the silent laptop" \
	state_is "$NS_SRV" "$ROVED_SOCK" 'peers[name=laptop].state' closed; then
	ok "roved dropped the silent laptop"
else
	fail "roved still shows laptop $(srv_get 'peers[name=laptop].state') 10 s into the blackhole"
fi
server_blackhole off
if wait_for 40 "the laptop to reconnect after the blackhole" lap_handshakes 4; then
	ok "laptop reconnected after the blackhole"
else
	lap_alive
	fail "laptop did not reconnect within 40 s after the path came back"
fi
check "laptop -> server after the blackhole" ping_ok "$NS_LAP" -c 5 -i 0.05 "$SRV_TUN4"

# 4. The client stops cleanly: exit 0, its TUN and routes are gone, and the
# server sees it leave.
rc=0; stop_pid "$LAP_PID" || rc=$?
forget_pid "$LAP_PID"
expect_eq "rove exit status after SIGTERM" 0 "$rc"
if ip -n "$NS_LAP" link show rove0 >/dev/null 2>&1; then
	fail "rove left rove0 behind"
else
	ok "rove removed rove0"
fi
expect_eq "routes left in the laptop's namespace" \
	"198.18.1.0/24 dev eth0 proto kernel scope link src 198.18.1.2" \
	"$(ip -n "$NS_LAP" -4 route show | sed 's/ *$//')"
if wait_for 5 "roved to see the laptop leave" \
	state_is "$NS_SRV" "$ROVED_SOCK" 'peers[name=laptop].state' closed; then
	ok "roved shows laptop closed after the client left"
else
	fail "roved shows laptop $(srv_get 'peers[name=laptop].state') after the client left"
fi
e2e_finish
