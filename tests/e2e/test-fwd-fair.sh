#!/usr/bin/env bash
# Fairness between a forward and the packet tunnel on one QUIC connection:
# ping RTT laptop -> 198.19.77.1 (through rove0, QUIC DATAGRAMs, every 10 ms)
# idle, then while iperf3 saturates a LocalForward (a QUIC stream) on the
# same connection. The loaded average must stay below 10 x the idle average
# + 5 ms (a bulk stream may add queueing, but must not starve datagrams),
# and at most 5% of the pings may be lost under load.
#
# The laptop's uplink is a 100 Mbit/s token bucket with a router's queue
# (96 kB, 64 packets): on a real path the link is what the stream and the
# datagrams compete for. On a bare veth the bottleneck is the CPU instead
# (four busy processes on two cores), and a ping then measures the
# scheduler, not rove's sending order.
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
command -v iperf3 >/dev/null || die "iperf3 is not installed"
topo_up
tc -n "$NS_LAP" qdisc replace dev eth0 root tbf rate 100mbit burst 32kb limit 96000 ||
	die "cannot shape the laptop's uplink"

L_PORT=15201
T_PORT=5201
COUNT=300            # pings per phase, 10 ms apart: 3 s

peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
client_add "$WORK/configs/rove.conf" "LocalForward = $L_PORT = $LAN_HOST:$T_PORT"
bg iperf3-server "$NS_LAN" iperf3 -s -B "$LAN_HOST" -p "$T_PORT"
wait_listen "$NS_LAN" "$T_PORT" "iperf3"
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"
wait_for 10 "laptop reaches $SRV_TUN4 through the tunnel" \
	ping_ok "$NS_LAP" -c 1 "$SRV_TUN4" || die "no ping through the tunnel"

# pings OUT: COUNT pings, 10 ms apart; prints "avg_ms loss_percent".
pings() {
	nsx "$NS_LAP" ping -n -q -i 0.01 -c "$COUNT" -W 1 "$SRV_TUN4" >"$1" 2>&1
	awk -F'[/ ]+' '/^rtt/ { avg = $8 } / packet loss/ { for (i = 1; i <= NF; i++) if ($i ~ /%$/) loss = $i }
		END { sub(/%/, "", loss); print (avg == "" ? "none" : avg), loss }' "$1"
}

read -r idle_avg idle_loss < <(pings "$WORK/ping-idle.txt")
log "idle: avg RTT $idle_avg ms, $idle_loss% lost ($(grep ^rtt "$WORK/ping-idle.txt"))"
[ "$idle_avg" != none ] || die "no idle RTT: $(cat "$WORK/ping-idle.txt")"

# The load: iperf3 through the forward for 10 s; the pings start once
# data is flowing (roved has written 20 MB to iperf3's data connection).
bg iperf3-client "$NS_LAP" iperf3 -c 127.0.0.1 -p "$L_PORT" -t 10 -J
ipc=$BG_PID
wait_for 10 "20 MB through the forward" srv_fwd_rx_over 20000000 || fail "no data flows through the forward"
read -r load_avg load_loss < <(pings "$WORK/ping-load.txt")
log "loaded: avg RTT $load_avg ms, $load_loss% lost ($(grep ^rtt "$WORK/ping-load.txt"))"
if kill -0 "$ipc" 2>/dev/null; then
	ok "the forward was still busy when the pings ended"
else
	fail "iperf3 ended before the loaded pings did"
fi
wait_for 20 "iperf3 finishes" eval "! kill -0 $ipc 2>/dev/null"
wait "$ipc"; expect_eq "iperf3 client exit status" 0 "$?"
forget_pid "$ipc"
bps=$("$PY" -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]))' \
	"$WORK/iperf3-client.log" 2>/dev/null || echo 0)
log "forward throughput during the test: $(awk -v b="$bps" 'BEGIN { printf "%.0f Mbit/s", b / 1e6 }')"

[ "$load_avg" != none ] || die "no loaded RTT: $(cat "$WORK/ping-load.txt")"
limit=$(awk -v i="$idle_avg" 'BEGIN { printf "%.3f", 10 * i + 5 }')
if awk -v l="$load_avg" -v m="$limit" 'BEGIN { exit !(l < m) }'; then
	ok "loaded avg RTT $load_avg ms < 10 x idle ($idle_avg ms) + 5 ms = $limit ms"
else
	fail "loaded avg RTT $load_avg ms >= 10 x idle ($idle_avg ms) + 5 ms = $limit ms"
fi
if awk -v l="$load_loss" 'BEGIN { exit !(l <= 5) }'; then
	ok "pings lost under load: $load_loss% (<= 5%)"
else
	fail "pings lost under load: $load_loss% (> 5%)"
fi
fwd_finish
