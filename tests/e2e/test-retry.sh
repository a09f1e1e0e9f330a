#!/usr/bin/env bash
# Address validation: with RetryThreshold = 0 roved asks every new client
# to answer a Retry first. The client must get through it (and its tunnel
# work); a reconnect of the same process presents the NEW_TOKEN token it
# was given and is admitted without a Retry; a new process, which has no
# token, gets a Retry again; and a token given before roved restarts still
# counts after it (the token keys are in StateDir). The admission counters
# say exactly that.
# e2e: light
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
topo_up
C=$WORK/configs
echo "RetryThreshold = 0" >"$WORK/retry.line"
# Into [Server]: the line after the section header.
sed -i '/^\[Server\]/r '"$WORK/retry.line" "$C/roved.conf"
grep -q '^RetryThreshold = 0$' "$C/roved.conf" || die "cannot set RetryThreshold"
# Short timeouts, so a silent path is given up in seconds (as in
# test-reconnect).
conf_set "$C/rove.conf" KeepAlive 1
conf_set "$C/rove.conf" IdleTimeout 4

adm() { srv_get "admission.$1"; }
# expect_admission RETRIES ACCEPTED VALIDATED
expect_admission() {
	expect_eq "Retry packets sent" "$1" "$(adm retries)"
	expect_eq "handshakes admitted" "$2" "$(adm accepted)"
	expect_eq "handshakes with a proven address" "$3" "$(adm validated)"
	expect_eq "forged or stale tokens" 0 "$(adm bad_tokens)"
}
lap() { sget "$NS_LAP" "$LAP_SOCK" "peers[0].$1" 2>/dev/null; }
lap_not_established() { [ "$(lap state)" != established ]; }
lap_handshakes() { [ "$(lap state)" = established ] && [ "$(lap handshakes)" = "$1" ]; }

# 1. The first connection answers a Retry: one for each datagram of the
# client's first flight that comes without a token (a stateless server
# cannot tell they are one ClientHello): two with the hybrid key share's
# 1.2 KB (wolfSSL 5.9, KeyExchange = hybrid), one with X25519 alone.
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up through a Retry"
check "laptop -> server after a Retry" ping_ok "$NS_LAP" -c 5 -i 0.05 "$SRV_TUN4"
case $(lap key_exchange) in
X25519MLKEM768) R=2 ;;
*) R=1 ;;
esac
log "key exchange $(lap key_exchange): $R Retry per first flight"
expect_admission "$R" 1 1

# 2. The path goes silent until both ends give up; the same process then
# reconnects with its NEW_TOKEN token: admitted at once, no Retry.
server_blackhole on
wait_for 10 "the laptop to give up on the silent path" lap_not_established ||
	fail "laptop still established 10 s into a blackhole (IdleTimeout 4)"
wait_for 10 "roved to drop the silent laptop" \
	state_is "$NS_SRV" "$ROVED_SOCK" 'peers[name=laptop].state' closed ||
	fail "roved still shows the laptop 10 s into the blackhole"
server_blackhole off
if wait_for 40 "the laptop to reconnect" lap_handshakes 2; then
	ok "laptop reconnected after the blackhole"
else
	fail "laptop did not reconnect within 40 s"
fi
check "laptop -> server after the reconnect" ping_ok "$NS_LAP" -c 5 -i 0.05 "$SRV_TUN4"
expect_admission "$R" 2 2

# 3. A new client process has no token: a Retry again.
stop_pid "$LAP_PID"
forget_pid "$LAP_PID"
mv "$WORK/laptop.log" "$WORK/laptop-1.log"
start_client laptop
wait_established laptop || die "the restarted laptop does not come up"
check "laptop -> server after its restart" ping_ok "$NS_LAP" -c 5 -i 0.05 "$SRV_TUN4"
expect_admission "$((2 * R))" 3 3
expect_eq "handshakes under way now" 0 "$(adm half_open)"

# 4. roved restarts (its counters start again from 0). The laptop learns
# it from a stateless reset and reconnects with the NEW_TOKEN token the
# old roved gave it: no Retry.
[ -s "$(conf_path "$C/roved.conf" StateDir)/token.key" ] ||
	fail "roved keeps no token.key in its StateDir"
stop_pid "$ROVED_PID"
forget_pid "$ROVED_PID"
mv "$WORK/roved.log" "$WORK/roved-1.log"
start_roved
if wait_for 20 "the laptop to reconnect to the new roved" lap_handshakes 2; then
	ok "laptop reconnected to the restarted roved"
else
	fail "laptop did not reconnect to the restarted roved within 20 s"
fi
check "laptop -> server after roved's restart" ping_ok "$NS_LAP" -c 5 -i 0.05 "$SRV_TUN4"
expect_admission 0 1 1
e2e_finish
