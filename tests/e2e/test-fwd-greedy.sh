#!/usr/bin/env bash
# A greedy peer: the laptop opens forwards to a target that sends without
# end, never reads them, keeps opening more, and then never acknowledges
# anything (its packets to roved are dropped). roved must hold at most
# ForwardMemory of that peer's data (the bound the README states), its
# RSS must stay within idle + ForwardMemory + slack, and the other peer
# (branch) must keep working through it all.
#
# ForwardBuffer = 2 MiB per forward and 24 forwards could pin 48 MiB;
# ForwardMemory = 4 MiB is what must hold. The slack (allocator, libevent
# and ngtcp2 per-packet buffers) is 8 MiB; under ASan, whose quarantine
# keeps freed memory resident, the quarantine is capped at 4 MiB and the
# slack is 16 MiB, as in test-fwd-slow.
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
topo_up

FB=$((2 * 1024 * 1024))
FM=$((4 * 1024 * 1024))
L_PORT=7001; T_PORT=7101
CONNS=24

SLACK_KB=$((8 * 1024))
if grep -q __asan_init "$BUILD/roved"; then
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4"
	SLACK_KB=$((16 * 1024))
	log "sanitizer build: ASAN_OPTIONS=$ASAN_OPTIONS"
fi

server_set ForwardBuffer "$FB"
server_set ForwardMemory "$FM"
peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
client_add "$WORK/configs/rove.conf" \
	"ForwardBuffer = $FB" \
	"LocalForward = $L_PORT = $LAN_HOST:$T_PORT"
# Each connection to the target gets 1 GiB sent at it: it never ends
# within the test.
peer_bg source "$NS_LAN" serve "$LAN_HOST:$T_PORT" --send 1024M \
	--results "$WORK/source.json"
wait_listen "$NS_LAN" "$T_PORT" "the endless source"
start_roved
start_client laptop
start_client branch
wait_established laptop || die "laptop's tunnel does not come up"
wait_established branch || die "branch's tunnel does not come up"
wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"

idle=$(rss_kb "$ROVED_PID")
bound=$((idle + FM / 1024 + SLACK_KB))
log "roved idle VmRSS $idle kB; bound $bound kB (idle + ForwardMemory $FM B + $SLACK_KB kB)"

# The local application: opens CONNS connections, 8 at a time a second
# apart, with small receive buffers, and never reads them.
cat >"$WORK/noread.py" <<'PY'
import socket, sys, time
port, conns, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
socks = []
for i in range(conns):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    socks.append(s)
    if i % 8 == 7:
        time.sleep(1)
print("open", len(socks), flush=True)
time.sleep(hold)
PY
bg noread "$NS_LAP" "$PY" "$WORK/noread.py" "$L_PORT" "$CONNS" 40
noread=$BG_PID

peak=0
sample() {
	local r u
	r=$(rss_kb "$ROVED_PID"); [ "$r" -gt "$peak" ] && peak=$r
	u=$(srv_get 'peers[name=laptop].stream_unacked' 2>/dev/null) || u=0
	[ "${u:-0}" -gt "${unacked_max:-0}" ] && unacked_max=$u
}
unacked_max=0
has_forwards() { srv_forwards_are "$CONNS"; }
wait_for 15 "roved to open all $CONNS forwards" has_forwards ||
	fail "roved has $(forwards_count "$NS_SRV" "$ROVED_SOCK" laptop) forwards, not $CONNS"
for _ in $(seq 1 20); do sample; sleep 0.2; done
log "never reading: roved peak VmRSS $peak kB, peer's unacknowledged stream data at most $unacked_max B"

# Never acknowledging: the laptop's packets no longer reach roved.
nsx "$NS_SRV" nft -f - <<NFT || die "cannot drop the laptop's packets"
table inet rove_greedy {
	chain in {
		type filter hook input priority 0; policy accept;
		ip saddr $LAP_OUTER udp dport 4433 drop
	}
}
NFT
for _ in $(seq 1 40); do sample; sleep 0.2; done
log "never acknowledging: roved peak VmRSS $peak kB (+$((peak - idle))), unacknowledged at most $unacked_max B"

if [ "$unacked_max" -gt 0 ] && [ "$unacked_max" -le "$FM" ]; then
	ok "the greedy peer's unacknowledged data peaked at $unacked_max B <= ForwardMemory $FM B"
else
	fail "the greedy peer's unacknowledged data peaked at $unacked_max B (bound $FM B, and it must be > 0)"
fi
if [ "$peak" -le "$bound" ]; then
	ok "roved's peak VmRSS $peak kB <= $bound kB"
else
	fail "roved's peak VmRSS $peak kB > $bound kB"
fi
# Everyone else keeps working, at once.
check "branch -> server while the laptop is greedy" \
	ping_ok "$NS_BR" -c 20 -i 0.05 "$SRV_TUN4"
alive "$ROVED_PID" roved
nsx "$NS_SRV" nft delete table inet rove_greedy
stop_pid "$noread"
forget_pid "$noread"
fwd_finish laptop branch
