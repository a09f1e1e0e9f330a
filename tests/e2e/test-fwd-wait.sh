#!/usr/bin/env bash
# Connections to forwards made while there is no session wait for it
# (ForwardWait, ForwardWaitMax) instead of being reset:
#
#   rove (laptop) -- roved (stopped, then started) -- LAN host: echo :7101
#   LocalForward 7001 -> LAN:7101, DynamicForward 1080 (SOCKS5)
#   ForwardWait = 8, ForwardWaitMax = 2
#
# 1. roved is not running: a connection to the LocalForward waits 8 s and
#    is then reset, with the documented log line (held_expired 1).
# 2. Two connections (one through SOCKS5) wait; a third is reset at once,
#    ForwardWaitMax being reached (held_full 1, its log line). roved then
#    starts, and both waiting connections complete byte-exact.
# e2e: light
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
topo_up

T_PORT=7101
WAIT_S=8
peer_set laptop AllowForward "198.19.10.0/24:*"
client_add "$WORK/configs/rove.conf" \
	"LocalForward = 7001 = $LAN_HOST:$T_PORT" \
	"DynamicForward = 1080" \
	"ForwardWait = $WAIT_S" \
	"ForwardWaitMax = 2"
peer_bg echo "$NS_LAN" serve "$LAN_HOST:$T_PORT" --echo --accepts "$WORK/accepts"
wait_listen "$NS_LAN" "$T_PORT" "the echo target"
ROVED_SOCK=$(conf_path "$WORK/configs/roved.conf" ControlSocket)
start_client laptop
wait_listen "$NS_LAP" 7001 "rove's LocalForward"
wait_listen "$NS_LAP" 1080 "rove's DynamicForward"
lap() { sget "$NS_LAP" "$LAP_SOCK" "peers[0].forward_counters.$1"; }

# 1. The wait limit.
out=$(peer_run "$NS_LAP" 30 probe 127.0.0.1:7001 --timeout 20)
log "probe without a session: $out"
expect_eq "a connection that waited too long is closed by" reset "$(jfield "$out" closed)"
ms=$(jfield "$out" ms)
check "it waited ForwardWait ($ms ms, expected $((WAIT_S * 1000)) to $((WAIT_S * 1000 + 1500)))" \
	awk -v m="$ms" -v w="$WAIT_S" 'BEGIN { exit !(m >= w * 1000 - 50 && m < w * 1000 + 1500) }'
expect_eq "rove's held connections" 1 "$(lap held)"
expect_eq "rove's connections closed after ForwardWait" 1 "$(lap held_expired)"
check "rove logs why it closed the connection" \
	grep -q "forward to $LAN_HOST:$T_PORT closed: no session to the server within ForwardWait ($WAIT_S s)" \
	"$WORK/laptop.log"

# 2. The cap, then the session arrives.
peer_bg wait-local "$NS_LAP" many 127.0.0.1:7001 --conns 1 --size 64K --timeout 40
W1=$BG_PID
peer_bg wait-socks "$NS_LAP" many 127.0.0.1:1080 --conns 1 --size 64K \
	--socks "$LAN_HOST:$T_PORT" --timeout 40
W2=$BG_PID
held_is() { [ "$(lap held)" = "$1" ]; }
wait_for 5 "two connections waiting" held_is 3 || die "rove holds $(lap held) connections, expected 3"
out=$(peer_run "$NS_LAP" 30 probe 127.0.0.1:7001 --timeout 20)
log "probe over ForwardWaitMax: $out"
expect_eq "a connection over ForwardWaitMax is closed by" reset "$(jfield "$out" closed)"
check "at once ($(jfield "$out" ms) ms)" awk -v m="$(jfield "$out" ms)" 'BEGIN { exit !(m < 1000) }'
expect_eq "rove's connections closed over ForwardWaitMax" 1 "$(lap held_full)"
check "rove logs why it closed the connection" \
	grep -q "forward to $LAN_HOST:$T_PORT closed: 2 connections wait for the session already (ForwardWaitMax)" \
	"$WORK/laptop.log"
expect_eq "connections the target saw so far" 0 "$(lines "$WORK/accepts")"

start_roved
wait_exit() {
	local i
	for ((i = 0; i < 400; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	wait "$1"
}
wait_exit "$W1"; forget_pid "$W1"
wait_exit "$W2"; forget_pid "$W2"
r1=$(tail -n 1 "$WORK/wait-local.log")
r2=$(tail -n 1 "$WORK/wait-socks.log")
log "held LocalForward connection: $r1"
log "held SOCKS5 connection: $r2"
expect_eq "the held LocalForward connection echoed 64 KiB exactly" 1 "$(jfield "$r1" ok)"
expect_eq "the held SOCKS5 connection echoed 64 KiB exactly" 1 "$(jfield "$r2" ok)"
expect_eq "connections the target saw" 2 "$(lines "$WORK/accepts")"
expect_eq "rove's held connections" 3 "$(lap held)"
expect_eq "rove's held connections closed after ForwardWait" 1 "$(lap held_expired)"
expect_eq "rove's forwards opened" 2 "$(lap opened)"
completed_is() { [ "$(lap completed)" = 2 ]; }
wait_for 5 "both forwards completed" completed_is || fail "rove completed $(lap completed) forwards, expected 2"
fwd_finish
