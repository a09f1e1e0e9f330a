#!/usr/bin/env bash
# Roaming benchmark: how long traffic stops when the client's network
# changes, and how long a reconnect takes with 0-RTT and with 1-RTT, over a
# 50 ms round trip (tests/e2e/delay-relay in the NAT router, 25 ms each way).
#
# usage: bench/roam.sh BUILD_DIR [RUNS]
#   RUNS: samples per row (default 6; each migration run moves the client
#   there and back, two samples).
#
# Topology: tests/e2e/roam-lib.sh. The client sends a numbered UDP datagram
# every 2 ms through the tunnel to the LAN host behind roved, which records
# when each arrives (tests/e2e/roam-tool.py udp-send / udp-sink).
#
# Migration rows: t0 is the moment the change starts; "first delivery" is
# when the first datagram sent at or after t0 reaches the LAN host, which
# includes the 25 ms one-way delay of the path; "gap" is the longest time
# without any delivery after t0; "lost" counts datagrams sent after t0 that
# never arrived.
#   address replaced: a new address on the other link, the old address
#     deleted, the default route moved (the old path is gone at once)
#   link down: the old link goes down, the default route moves to the
#     other link, whose address was already there
#   NAT rebinding: the router flushes its conntrack table
# Reconnect rows: roved is killed and restarted; t0 is when the client sends
# its new Initial (captured on the client's link), after the stateless
# reset. "first delivery" is when the first datagram sent at or after t0
# arrives; "restored" is when the unbroken run of deliveries up to the end
# begins.
# A second table: two live uplinks (link A preferred by its route metric,
# link B second), at 0 and 50 ms round trip: link A down and back, silent
# (up with its routes, passing nothing) and answering again, its carrier
# lost and back, and rove suspended 60 s and 180 s while the NAT forgets
# it; each with a forward connection running across the event.
# ROAM_UPLINK_RUNS samples per row (default 2; suspend rows: 1);
# ROAM_UPLINKS_ONLY=1 runs this table alone.
. "$(dirname "$0")/../tests/e2e/roam-lib.sh"
TEST_NAME=bench-roam
RUNS=${2:-6}
roam_init "$1"
# This is a benchmark, not a test: print the table, not a count.
roam_report() { :; }
roam_topo_up 25
roam_configs
SINK_PORT=9000
RESULTS=$WORK/results

rtt=$(nsx "$RNS_C" ping -n -q -c 20 -i 0.05 "$S_OUT" | sed -n 's|.*= [0-9.]*/\([0-9.]*\)/.*|\1|p')
[ -n "$rtt" ] || die "cannot measure the round trip"
log "outer round trip: $rtt ms"

# sample ROW NAME CHANGE: one measured change; appends the figures to
# $RESULTS as "ROW first gap lost".
sample() {
	local row=$1 name=$2 change=$3 t0 res
	tool_bg "sink-$name" "$RNS_L" udp-sink "$LAN:$SINK_PORT" "$WORK/sink-$name" --timeout 60
	local sink_pid=$BG_PID
	wait_for 10 "the UDP sink" ready_in "$WORK/sink-$name.log" || die "udp-sink did not start"
	tool_bg "send-$name" "$RNS_C" udp-send "$LAN:$SINK_PORT" --interval 0.002 --duration 2.5
	local send_pid=$BG_PID
	sleep 0.8
	t0=$(now_ns)
	$change
	wait_exit "$send_pid" 20
	sleep 0.2
	stop_pid "$sink_pid"
	forget_pid "$sink_pid"
	res=$(tool arrivals "$WORK/sink-$name" --t0 "$t0")
	log "$row ($name): $res"
	printf '%s|%s|%s|%s\n' "$row" "$(jf "$res" first_sent_after_ms)" \
		"$(jf "$res" max_gap_ms)" "$(jf "$res" lost_after)" >>"$RESULTS"
}

# settle ADDR: the connection runs from ADDR again and carries traffic.
settle() {
	wait_for 10 "the client's path from $1" client_local_is "$1" || die "the client did not move to $1"
	wait_for 10 "traffic through the tunnel" ping_ok "$RNS_C" -c 1 "$S_TUN" ||
		die "no traffic through the tunnel after the change"
}

to_b() {
	ip -n "$RNS_C" addr add "$C_B/24" dev cb
	ip -n "$RNS_C" addr del "$C_A/24" dev ca
	ip -n "$RNS_C" route replace default via "$R_B" dev cb
}
to_a() {
	ip -n "$RNS_C" addr add "$C_A/24" dev ca
	ip -n "$RNS_C" addr del "$C_B/24" dev cb
	ip -n "$RNS_C" route replace default via "$R_A" dev ca
}
down_a() {
	ip -n "$RNS_C" link set ca down
	ip -n "$RNS_C" link set cb up
	ip -n "$RNS_C" route replace default via "$R_B" dev cb
}
down_b() {
	ip -n "$RNS_C" link set cb down
	ip -n "$RNS_C" link set ca up
	ip -n "$RNS_C" route replace default via "$R_A" dev ca
}
flush_nat() { nsx "$RNS_R" conntrack -F >/dev/null 2>&1; }

single_link_rows() {
	roam_start_roved
	roam_start_client
	roam_wait_up || die "the tunnel does not come up"

	for ((i = 1; i <= RUNS / 2; i++)); do
		sample "address replaced" "addr-b-$i" to_b
		settle "$C_B"
		sample "address replaced" "addr-a-$i" to_a
		settle "$C_A"
	done
	ip -n "$RNS_C" addr add "$C_B/24" dev cb
	for ((i = 1; i <= RUNS / 2; i++)); do
		sample "link down" "link-b-$i" down_a
		settle "$C_B"
		sample "link down" "link-a-$i" down_b
		settle "$C_A"
	done
	ip -n "$RNS_C" link set cb up
	for ((i = 1; i <= RUNS; i++)); do
		sample "NAT rebinding" "nat-$i" flush_nat
	done

	# reconnect ROW: roved killed and restarted under traffic, RUNS times.
	reconnect() {
		local row=$1 i t_kill t_init res flight hs
		for ((i = 1; i <= RUNS; i++)); do
			hs=$(cget handshakes)
			tool_bg "sink-$row-$i" "$RNS_L" udp-sink "$LAN:$SINK_PORT" "$WORK/sink-$row-$i" --timeout 60
			local sink_pid=$BG_PID
			wait_for 10 "the UDP sink" ready_in "$WORK/sink-$row-$i.log" || die "udp-sink did not start"
			tool_bg "sniff-$row-$i" "$RNS_C" sniff ca "$PORT" "$WORK/cap-$row-$i" --timeout 60
			local sniff_pid=$BG_PID
			wait_for 10 "the capture" ready_in "$WORK/sniff-$row-$i.log" || die "the capture does not start"
			tool_bg "send-$row-$i" "$RNS_C" udp-send "$LAN:$SINK_PORT" --interval 0.002 --duration 3
			local send_pid=$BG_PID
			sleep 0.8
			t_kill=$(now_ns)
			roam_kill_roved
			roam_start_roved
			wait_for 15 "the reconnect" client_hs_is $((hs + 1)) || die "the client did not reconnect"
			wait_exit "$send_pid" 20
			sleep 0.2
			stop_pid "$sink_pid"; forget_pid "$sink_pid"
			stop_pid "$sniff_pid"; forget_pid "$sniff_pid"
			flight=$(tool flight "$WORK/cap-$row-$i" --to "$S_OUT:$PORT" --after "$t_kill")
			t_init=$(jf "$flight" first_initial_ns)
			[ "$t_init" != null ] || die "no Initial captured"
			res=$(tool arrivals "$WORK/sink-$row-$i" --t0 "$t_init" --restored)
			log "$row run $i: 0-RTT packets $(jf "$flight" zero_rtt); $res"
			printf '%s|%s|%s|%s\n' "$row" "$(jf "$res" first_sent_after_ms)" \
				"$(jf "$res" restored_ms)" "$(jf "$res" lost_after)" >>"$RESULTS"
		done
		log "$row: client 0-RTT attempted $(cget zero_rtt.attempted)," \
			"accepted $(cget zero_rtt.accepted)"
	}
	reconnect "reconnect, 0-RTT"

	stop_pid "$LAP_PID"; forget_pid "$LAP_PID"
	stop_pid "$ROVED_PID"; forget_pid "$ROVED_PID"
	server_key "$RCONF_S" ZeroRTT no
	client_key "$RCONF_C" ZeroRTT no
	roam_start_roved
	roam_start_client
	roam_wait_up || die "the tunnel does not come up with ZeroRTT = no"
	reconnect "reconnect, 1-RTT"
}

if [ -z "${ROAM_UPLINKS_ONLY:-}" ]; then
	single_link_rows
	stop_pid "$LAP_PID"; forget_pid "$LAP_PID"
	stop_pid "$ROVED_PID"; forget_pid "$ROVED_PID"
fi

# ---- two live uplinks ------------------------------------------------------
# Link A (preferred: route metric 100) and link B (metric 200) both up, at
# 0 and 50 ms round trip. t0 is the event; for the suspend rows it is the
# wake-up (rove stopped with SIGSTOP for the time named, the NAT mapping
# flushed meanwhile). Each sample also runs a forward connection (a paced
# transfer through the LocalForward) across the event: "fwd kept" counts
# those that finished with equal sha256.
UPLINK_RESULTS=$WORK/uplinks
UPLINK_RUNS=${ROAM_UPLINK_RUNS:-2}
T0_FILE=$WORK/t0

# uplink_sample RTT ROW NAME CHANGE SECONDS: as sample, for SECONDS of
# traffic, with a forward transfer alongside; CHANGE may write its own t0
# (ns) to $T0_FILE.
uplink_sample() {
	local rtt=$1 row=$2 name=$3 change=$4 secs=$5 t0 res xfer
	rm -f "$T0_FILE"
	tool_bg "sink-$name" "$RNS_L" udp-sink "$LAN:$SINK_PORT" "$WORK/sink-$name" --timeout $((secs + 60))
	local sink_pid=$BG_PID
	wait_for 10 "the UDP sink" ready_in "$WORK/sink-$name.log" || die "udp-sink did not start"
	tool_bg "send-$name" "$RNS_C" udp-send "$LAN:$SINK_PORT" --interval 0.002 --duration "$secs"
	local send_pid=$BG_PID
	tool_bg "xfer-$name" "$RNS_C" xfer-send "127.0.0.1:$FWD_PORT" 1M --duration $((secs - 1)) --timeout $((secs + 120))
	local xfer_pid=$BG_PID
	sleep 0.8
	t0=$(now_ns)
	$change
	[ -s "$T0_FILE" ] && t0=$(cat "$T0_FILE")
	wait_exit "$send_pid" $((secs + 30))
	wait_exit "$xfer_pid" $((secs + 150))
	xfer=$(tail -n 1 "$WORK/xfer-$name.log")
	sleep 0.2
	stop_pid "$sink_pid"
	forget_pid "$sink_pid"
	res=$(tool arrivals "$WORK/sink-$name" --t0 "$t0")
	log "$row at $rtt ms ($name): $res; forward $(jf "$xfer" ok)"
	printf '%s|%s|%s|%s|%s|%s\n' "$row" "$rtt" "$(jf "$res" first_sent_after_ms)" \
		"$(jf "$res" max_gap_ms)" "$(jf "$res" lost_after)" "$(jf "$xfer" ok)" >>"$UPLINK_RESULTS"
}

a_down() { ip -n "$RNS_C" link set ca down; }
a_up() {
	ip -n "$RNS_C" link set ca up
	ip -n "$RNS_C" route replace default via "$R_A" dev ca metric 100
}
a_silent() { roam_drop silent on; }
a_speaks() { roam_drop silent off; }
a_carrier_lost() { ip -n "$RNS_R" link set ra down; }
a_carrier_back() { ip -n "$RNS_R" link set ra up; }
# suspend SECONDS: rove asleep while the NAT forgets; t0 = the wake-up.
suspend_for() {
	kill -STOP "$LAP_PID"
	sleep 1
	flush_nat
	sleep $(($1 - 1))
	now_ns >"$T0_FILE"
	kill -CONT "$LAP_PID"
}
suspend_60() { suspend_for 60; }
suspend_180() { suspend_for 180; }
# UDP to and from roved dropped at the router (both uplinks): the session
# moves to TLS over TCP, and back to QUIC when UDP returns; the forward
# moves with it.
udp_off() {
	roam_drop udpblock on "$(printf 'ip daddr %s udp dport 4433 drop\nip saddr %s udp sport 4433 drop' "$S_OUT" "$S_OUT")"
}
udp_on() { roam_drop udpblock off; }
transport_is() { [ "$(cget transport)" = "$1" ] && client_state_is established; }
on_transport() { wait_for 30 "the session on $1" transport_is "$1" || die "the session did not move to $1"; }
on_a() { wait_for 30 "the client's path from $C_A" client_local_is "$C_A" || die "the client did not come back to $C_A"; }
on_b() { wait_for 30 "the client's path from $C_B" client_local_is "$C_B" || die "the client did not move to $C_B"; }

server_key "$RCONF_S" ZeroRTT yes
client_key "$RCONF_C" ZeroRTT yes
server_key "$RCONF_S" ListenTCP "$S_OUT:443"
ip -n "$RNS_C" addr replace "$C_B/24" dev cb
ip -n "$RNS_C" link set ca up
ip -n "$RNS_C" link set cb up
ip -n "$RNS_C" route flush exact 0.0.0.0/0
ip -n "$RNS_C" route add default via "$R_A" dev ca metric 100
ip -n "$RNS_C" route add default via "$R_B" dev cb metric 200
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up on two uplinks"
roam_fwd_sink 7200
for oneway in 0 25; do
	roam_delay_set "$oneway"
	r=$((oneway * 2))
	on_a
	for ((i = 1; i <= UPLINK_RUNS; i++)); do
		uplink_sample "$r" "link down" "down-$r-$i" a_down 4
		on_b
		uplink_sample "$r" "link back" "up-$r-$i" a_up 4
		on_a
		uplink_sample "$r" "silent uplink" "silent-$r-$i" a_silent 5
		on_b
		uplink_sample "$r" "silent uplink answers" "speaks-$r-$i" a_speaks 12
		on_a
		uplink_sample "$r" "carrier lost" "carrier-$r-$i" a_carrier_lost 5
		on_b
		uplink_sample "$r" "carrier back" "carrier-back-$r-$i" a_carrier_back 12
		on_a
		uplink_sample "$r" "UDP blocked (to TCP)" "udpoff-$r-$i" udp_off 8
		on_transport tcp
		uplink_sample "$r" "UDP back (to QUIC)" "udpon-$r-$i" udp_on 20
		on_transport quic
		on_a
	done
	uplink_sample "$r" "suspend 60 s" "suspend60-$r" suspend_60 64
	on_a
	uplink_sample "$r" "suspend 180 s" "suspend180-$r" suspend_180 184
	on_a
done
log "two uplinks: migrations $(cget migrations), uplink moves $(cget uplink_moves)," \
	"handshakes $(cget handshakes), moves to TCP $(cget tcp_fallbacks)"

[ -z "${ROAM_UPLINKS_ONLY:-}" ] && "$PY" - "$RESULTS" "$rtt" "$RUNS" <<'EOF'
import statistics
import sys

path, rtt, runs = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rows = {}
order = []
for line in open(path):
    name, *vals = line.rstrip('\n').split('|')
    if name not in rows:
        rows[name] = []
        order.append(name)
    rows[name].append([None if v in ('null', 'missing', '') else float(v) for v in vals])

def med(col):
    v = [x for x in col if x is not None]
    return statistics.median(v) if v else None

def fmt(v, unit=''):
    return '-' if v is None else '%.0f%s' % (v, unit)

print()
print('rove roaming: outer round trip %.1f ms (delay-relay, 25 ms each way); '
      'median of %s samples per row' % (rtt, runs))
print()
print('%-22s %14s %7s %14s %7s %7s' % ('', 'first delivery', '', 'gap/restored', '', 'lost'))
print('%-22s %14s %7s %14s %7s %7s' % ('event', 'ms', 'RTTs', 'ms', 'RTTs', 'pkts'))
print('-' * 76)
for name in order:
    cols = list(zip(*rows[name]))
    first, second, lost = med(cols[0]), med(cols[1]), med(cols[2])
    print('%-22s %14s %7s %14s %7s %7s' % (
        name, fmt(first), '-' if first is None else '%.2f' % (first / rtt),
        fmt(second), '-' if second is None else '%.2f' % (second / rtt),
        fmt(lost)))
print()
print('Migration rows count from the change (includes the 25 ms one-way trip);')
print('their second column is the longest delivery gap. Reconnect rows count')
print('from the new Initial; their second column is when delivery is restored')
print('for good. Datagrams every 2 ms.')
EOF

"$PY" - "$UPLINK_RESULTS" "$UPLINK_RUNS" <<'EOF'
import statistics
import sys

path, runs = sys.argv[1], sys.argv[2]
rows, order = {}, []
for line in open(path):
    name, rtt, *vals = line.rstrip('\n').split('|')
    key = (name, rtt)
    if key not in rows:
        rows[key] = []
        order.append(key)
    rows[key].append([None if v in ('null', 'missing', '') else float(v) for v in vals])

def med(col):
    v = [x for x in col if x is not None]
    return statistics.median(v) if v else None

def fmt(v):
    return '-' if v is None else '%.0f' % v

print()
print('rove on two live uplinks (A preferred, B second): median of %s samples '
      'per row (suspend rows: 1)' % runs)
print()
print('%-24s %5s %10s %9s %7s %9s' % ('event', 'RTT', 'first ms', 'gap ms', 'lost', 'fwd kept'))
print('-' * 70)
for key in order:
    cols = list(zip(*rows[key]))
    kept = sum(1 for x in cols[3] if x == 1)
    print('%-24s %5s %10s %9s %7s %9s' % (key[0], key[1], fmt(med(cols[0])),
          fmt(med(cols[1])), fmt(med(cols[2])), '%d/%d' % (kept, len(cols[3]))))
print()
print('Datagrams every 2 ms through the tunnel. "first": the first datagram')
print('sent at or after the event reaches the LAN host; "gap": the longest time')
print('without delivery after it; "lost": datagrams sent after it that never')
print('arrived. Suspend rows count from the wake-up.')
EOF
