#!/usr/bin/env bash
# A slow reader: the target on the LAN host reads 1 KiB/s while the client
# pushes up to 50 MiB into a LocalForward for 20 s, with ForwardBuffer =
# 1 MiB on both sides. Back-pressure must hold the data in flight, and so
# the memory, to the forward's buffers:
#  - bytes in flight inside the tunnel (what rove read from the client but
#    roved has not written to the target) <= 2 x ForwardBuffer: rove reads
#    from TCP only while its unacknowledged stream data is below
#    ForwardBuffer, and roved buffers at most the stream window
#    (= ForwardBuffer) of data its target has not taken;
#  - VmRSS of rove and of roved stays below their idle VmRSS (measured
#    first) + 2 x ForwardBuffer + 4 MiB (allocator slack, libevent and
#    ngtcp2 per-packet buffers). Under ASan, whose quarantine keeps freed
#    memory resident, the quarantine is capped at 4 MiB for this test and
#    the slack is 16 MiB (allocator size classes and shadow pages).
# Afterwards (the client gives up with a reset) both daemons run and a fresh
# forward works. (Whether the reset reaches the target: test-fwd-reset.sh.)
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
topo_up

FB=1048576
L_PORT=7001; T_PORT=7101     # slow target
L2_PORT=7002; T2_PORT=7102   # echo target, for the check afterwards
SECS=20

SLACK_KB=$((4 * 1024))
if nm -D "$BUILD/roved" 2>/dev/null | grep -q __asan_init ||
	grep -q __asan_init "$BUILD/roved"; then
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4"
	SLACK_KB=$((16 * 1024))
	log "sanitizer build: ASAN_OPTIONS=$ASAN_OPTIONS"
fi

server_set ForwardBuffer "$FB"
peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT, $LAN_HOST/32:$T2_PORT"
client_add "$WORK/configs/rove.conf" \
	"ForwardBuffer = $FB" \
	"LocalForward = $L_PORT = $LAN_HOST:$T_PORT" \
	"LocalForward = $L2_PORT = $LAN_HOST:$T2_PORT"
peer_bg slow "$NS_LAN" serve "$LAN_HOST:$T_PORT" --rate 1K --results "$WORK/slow.json"
peer_bg echo "$NS_LAN" serve "$LAN_HOST:$T2_PORT" --echo --results "$WORK/echo.json"
wait_listen "$NS_LAN" "$T_PORT" "the slow target"
wait_listen "$NS_LAN" "$T2_PORT" "the echo target"
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"

idle_rove=$(rss_kb "$LAP_PID")
idle_roved=$(rss_kb "$ROVED_PID")
bound_rove=$((idle_rove + 2 * FB / 1024 + SLACK_KB))
bound_roved=$((idle_roved + 2 * FB / 1024 + SLACK_KB))
log "idle VmRSS: rove $idle_rove kB, roved $idle_roved kB"
log "bounds: rove $bound_rove kB, roved $bound_roved kB (idle + 2 x $FB B + $SLACK_KB kB)"

bg pusher "$NS_LAP" "$PY" "$FWD_PEER" connect "127.0.0.1:$L_PORT" --send 50M \
	--duration "$SECS" --timeout $((SECS + 30))
pusher=$BG_PID

# Sample both processes' RSS and the forward's byte counts until the
# pusher gives up (bounded: SECS + 30 s).
peak_rove=0; peak_roved=0; inflight_max=0; samples=0
end=$((SECONDS + SECS + 30))
while kill -0 "$pusher" 2>/dev/null && [ $SECONDS -lt $end ]; do
	r=$(rss_kb "$LAP_PID"); [ "$r" -gt "$peak_rove" ] && peak_rove=$r
	r=$(rss_kb "$ROVED_PID"); [ "$r" -gt "$peak_roved" ] && peak_roved=$r
	tx=$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].forwards[0].tx_bytes' 2>/dev/null)
	rx=$(sget "$NS_SRV" "$ROVED_SOCK" 'peers[name=laptop].forwards[0].rx_bytes' 2>/dev/null)
	if [ -n "$tx" ] && [ -n "$rx" ]; then
		# rx is read after tx, so tx - rx can only understate what
		# is in flight; the bound holds at every instant.
		[ $((tx - rx)) -gt "$inflight_max" ] && inflight_max=$((tx - rx))
		last_tx=$tx; last_rx=$rx
	fi
	samples=$((samples + 1))
	sleep 0.2
done
wait "$pusher"
forget_pid "$pusher"
out=$(head -n1 "$WORK/pusher.log")
log "pusher: $out"
log "$samples samples; peak VmRSS: rove $peak_rove kB (+$((peak_rove - idle_rove))), roved $peak_roved kB (+$((peak_roved - idle_roved)))"
log "forward at the end: rove read ${last_tx:-?} B from the client, roved wrote ${last_rx:-?} B to the target; max in flight $inflight_max B"

expect_eq "the pusher gave up (aborted after $SECS s)" true "$(jfield "$out" aborted)"
pushed=$(jfield "$out" tx)
if [ "$pushed" -lt $((50 * 1024 * 1024)) ]; then
	ok "back-pressure: the client could push only $pushed of 52428800 bytes in $SECS s"
else
	fail "the client pushed all 50 MiB into a 1 KiB/s reader"
fi
if [ "${last_tx:-0}" -ge "$FB" ]; then
	ok "rove took at least ForwardBuffer ($last_tx B) from the client"
else
	fail "rove took only ${last_tx:-0} B from the client (less than one ForwardBuffer)"
fi
if [ "$inflight_max" -le $((2 * FB)) ]; then
	ok "bytes in flight in the tunnel $inflight_max <= 2 x ForwardBuffer"
else
	fail "bytes in flight in the tunnel $inflight_max > 2 x ForwardBuffer ($((2 * FB)))"
fi
if [ "$peak_rove" -le "$bound_rove" ]; then
	ok "rove's peak VmRSS $peak_rove kB <= $bound_rove kB"
else
	fail "rove's peak VmRSS $peak_rove kB > $bound_rove kB"
fi
if [ "$peak_roved" -le "$bound_roved" ]; then
	ok "roved's peak VmRSS $peak_roved kB <= $bound_roved kB"
else
	fail "roved's peak VmRSS $peak_roved kB > $bound_roved kB"
fi

alive "$ROVED_PID" roved
alive "$LAP_PID" rove
transfer_ok "$NS_LAP" "127.0.0.1:$L2_PORT" 4194304 "a fresh forward"
fwd_finish
