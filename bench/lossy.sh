#!/usr/bin/env bash
# TCP through rove and through trixie's wireguard-go over a wide-area path:
# 50 ms round trip (25 ms each way) with 0%, 1% and 2% random loss, in one
# run on the same machine.
#
# usage: bench/lossy.sh BUILD_DIR
#   BENCH_TIME=SECONDS   length of each iperf3 run (default 10)
#   BENCH_LOSS="0 0.1 1 2 1b3"  loss rates in percent, each direction on
#                        its own; RbB: R% in bursts of B packets on average
#                        (the relay's Gilbert model)
#   BENCH_DELAY=MS       one-way delay (default 25)
#   BENCH_SEED=N         seed of the relay's loss draws (default 1)
#   BENCH_RUNS=N         runs per tunnel, loss rate and direction, rove and
#                        wireguard-go alternating; the table shows medians
#                        (default 1)
#   BENCH_CC=cubic|bbr   rove's congestion controller at both ends
#                        (default: the configs' own, i.e. rove's default)
#   BENCH_TRANSPORT=tcp  rove's session over TLS on TCP (roved's ListenTCP,
#                        Transport = tcp): TCP inside TCP (default: quic)
#   BENCH_INNER_CC=ALGO  the congestion control of the TCP inside the
#                        tunnel (iperf3 -C; default: the host's)
#   BENCH_TUNNELS="rove rove-off wg"  what to run: rove (LossRecovery =
#                        auto, its default), rove with LossRecovery = off,
#                        and wireguard-go
#
#   +-- $NS_C (client) --+      +------ $NS_R (router) ------+      +-- $NS_S (server) --+
#   | eth0 198.18.40.2 --|------|- rc 198.18.40.1            |      | roved, wireguard-go|
#   | rove, wireguard-go |      |   rs 198.18.41.1 ----------|------|- eth0 198.18.41.2  |
#   +--------------------+      |   dA, dB: delay-relay TUNs |      +--------------------+
#                               +----------------------------+
#
# Every packet the router forwards detours through tests/e2e/delay-relay
# (`ip rule iif rc` into dA, out of dB toward the server; `iif rs` into dB,
# out of dA toward the client), which holds it BENCH_DELAY ms and drops it
# with the given probability, independently in each direction. No NAT: the
# router only forwards. The relay is restarted for each loss rate.
#
# At each loss rate, for upload (client -> server) and download (iperf3 -R),
# each of BENCH_TUNNELS in turn: a fresh tunnel, one iperf3 TCP stream for
# BENCH_TIME s, and a ping through the tunnel (every 0.1 s) while it runs.
# The tunnel is set up anew for every run, so that one run's trouble does
# not carry over into the next. Figures are the receiver's (iperf3's
# sum_received); "stall" marks a run with a 1-second interval in which the
# receiver got no byte, or one whose iperf3 did not finish in time (a
# tunnel that stops carrying anything leaves iperf3 waiting for its
# results, so every run is cut off BENCH_TIME + 15 s after it starts).
# Each run also notes the sending host's TCP retransmissions (nstat
# TcpRetransSegs of its namespace, per 100 segments sent) and, for rove,
# the repair bytes its sending end added per byte of data.
. "$(dirname "$0")/../tests/e2e/roam-lib.sh"
# shellcheck source=bench/lib-measure.sh
. "$(dirname "$0")/lib-measure.sh"
# shellcheck source=bench/lib-path.sh
. "$(dirname "$0")/lib-path.sh"
# shellcheck source=bench/lib-wg.sh
. "$(dirname "$0")/lib-wg.sh"
TEST_NAME=bench-lossy
BENCH_TIME=${BENCH_TIME:-10}
BENCH_LOSS=${BENCH_LOSS:-0 0.1 1 2 1b3}
BENCH_TUNNELS=${BENCH_TUNNELS:-rove rove-off wg}
BENCH_DELAY=${BENCH_DELAY:-25}
BENCH_SEED=${BENCH_SEED:-1}
BENCH_RUNS=${BENCH_RUNS:-1}
IPERF_PORT=5201

e2e_init "$@"
wg_find
for p in iperf3 ping timeout; do
	command -v $p >/dev/null || die "$p is not installed (scripts/deps.sh installs it)"
done
roam_relay_bin

NS_R=rove-$$-lr
router_topo_up "$NS_R"

conf_set "$WORK/configs/roved.conf" Listen "$S_ADDR:4433"
conf_set "$WORK/configs/rove.conf" Server "$S_ADDR:4433"
BENCH_TRANSPORT=${BENCH_TRANSPORT:-quic}
e2e_transport "$BENCH_TRANSPORT" "$S_ADDR"
if [ -n "${BENCH_CC:-}" ]; then
	conf_set "$WORK/configs/roved.conf" Congestion "$BENCH_CC"
	# rove.conf has the one section and no Congestion line of its own.
	echo "Congestion = $BENCH_CC" >>"$WORK/configs/rove.conf"
	log "rove's congestion controller: $BENCH_CC"
fi

# relay_start LOSS: the delay relay with LOSS percent (RbB: in bursts of
# B), and the routes into it (they go with its devices when it stops).
RELAY_PID=
relay_start() {
	local loss=$1 args=(-t 1800)
	# The relay's counters of the previous rate stay in their own log.
	RELAY_LOG=relay-$loss
	case $loss in
	0) ;;
	*b*) args+=(-l "${loss%b*}" -b "${loss#*b}" -s "$BENCH_SEED") ;;
	*) args+=(-l "$loss" -s "$BENCH_SEED") ;;
	esac
	bg "$RELAY_LOG" "$NS_R" "$RELAY" "${args[@]}" dA dB "$BENCH_DELAY"
	RELAY_PID=$BG_PID
	wait_for 10 "the delay relay ($loss% loss)" ready_in "$WORK/$RELAY_LOG.log" || {
		log "delay-relay did not start: $(head -c 300 "$WORK/$RELAY_LOG.log")"
		return 1
	}
	relay_routes "$NS_R" || return 1
	wait_for 10 "the client reaching the server through the relay" \
		quiet_ping "$NS_C" "$S_ADDR"
}

relay_stop() {
	[ -n "$RELAY_PID" ] || return 0
	stop_pid "$RELAY_PID"
	forget_pid "$RELAY_PID"
	RELAY_PID=
	local line
	while read -r line; do
		RAW+=("relay ${RELAY_LOG#relay-}% loss: $line")
	done < <(sed -n 's/^delay-relay: //p' "$WORK/$RELAY_LOG.log")
}

iperf_listening() { nsx "$NS_S" ss -Hltn "sport = :$IPERF_PORT" | grep -q "$IPERF_PORT"; }

# parse_iperf JSON DIR: "MBITS ZERO LONGEST RETRANS INTERVALS" from a
# finished client's JSON: the receiver's Mbit/s, how many of the
# receiver's 1-second intervals got no byte and the longest run of them,
# the sender's retransmissions and the receiver's per-second Mbit/s.
parse_iperf() {
	"$PY" - "$1" "$2" <<-'EOF'
	import json, sys
	d = json.load(open(sys.argv[1]))
	if "error" in d and "end" not in d:
	    sys.exit(1)
	end = d["end"]
	mbits = end["sum_received"]["bits_per_second"] / 1e6
	# The receiver's intervals: the server's on upload, the client's own
	# with -R.
	if sys.argv[2] == "up":
	    iv = d.get("server_output_json", {}).get("intervals", [])
	else:
	    iv = d.get("intervals", [])
	secs = [(i["sum"]["bytes"], i["sum"]["seconds"]) for i in iv]
	# A short tail interval (the test's last fraction of a second) is not
	# a second without data.
	full = [(b, s) for b, s in secs if s >= 0.5]
	zero = longest = run = 0
	for b, _ in full:
	    if b == 0:
	        zero += 1
	        run += 1
	        longest = max(longest, run)
	    else:
	        run = 0
	retr = end.get("sum_sent", {}).get("retransmits", "-")
	def fmt(b, s):
	    m = b * 8 / s / 1e6
	    return "%.0f" % m if m >= 10 else "%.1f" % m if m >= 1 or b == 0 else "%.2f" % m
	per = ",".join(fmt(b, s) for b, s in full) or "-"
	print("%.1f %d %d %s %s" % (mbits, zero, longest, retr, per))
	EOF
}

# ping_stats LOG: "AVG MAX LOSS%" of a finished ping, or "- - 100%".
ping_stats() {
	local rtt loss
	rtt=$(sed -n 's|^rtt min/avg/max/mdev = [^/]*/\([^/]*\)/\([^/]*\)/.*|\1 \2|p' "$1")
	loss=$(sed -n 's/.* \([0-9.]*%\) packet loss.*/\1/p' "$1")
	printf '%s %s\n' "${rtt:-- -}" "${loss:-?}"
}

# Results, by "TUNNEL.LOSS.DIR": R[...mbit] (or "stall"/"failed"),
# R[...stall] (zero-byte seconds, "-" if none), R[...ping] "avg/max".
declare -A R
RAW=()

# rx_sampler NS DEV SECONDS: the receive byte counter of DEV in NS, once a
# second with a timestamp, for SECONDS; a run whose iperf3 is cut off
# leaves no figures of its own, and this shows whether the tunnel went
# dead or only crawled.
rx_sampler() {
	local i
	for ((i = 0; i <= $3; i++)); do
		printf '%s %s\n' "$(date +%s.%N)" \
			"$(ip netns exec "$1" cat "/sys/class/net/$2/statistics/rx_bytes" 2>/dev/null)"
		sleep 1
	done
}

# rx_rates LOG SECONDS: Mbit/s per second over the first SECONDS samples.
rx_rates() {
	"$PY" - "$1" "$2" <<-'EOF'
	import sys
	rows = []
	for line in open(sys.argv[1]):
	    f = line.split()
	    if len(f) == 2:
	        rows.append((float(f[0]), int(f[1])))
	rows = rows[:int(sys.argv[2]) + 1]
	def fmt(m):
	    return "%.0f" % m if m >= 10 else "%.1f" % m if m >= 1 else "%.3f" % m
	print(",".join(fmt((b1 - b0) * 8 / (t1 - t0) / 1e6)
	               for (t0, b0), (t1, b1) in zip(rows, rows[1:])) or "-")
	EOF
}

# tcp_segs NS: "OutSegs RetransSegs" of NS's TCP now.
tcp_segs() {
	nsx "$1" nstat -asz TcpOutSegs TcpRetransSegs | awk '
		$1 == "TcpOutSegs" { o = $2 } $1 == "TcpRetransSegs" { r = $2 }
		END { print o + 0, r + 0 }'
}

# run_iperf TUNNEL LOSS DIR DEST RX_NS RX_DEV: one measured run through a
# tunnel that is up, RX_DEV in RX_NS being the receiver's end of it; the
# iperf3 server is started for this run only, so an aborted run cannot
# leave it busy for the next.
run_iperf() {
	local tun=$1 loss=$2 dir=$3 dest=$4 rx_ns=$5 rx_dev=$6 key=$1.$2.$3
	local rx_pid tx_ns=$NS_C seg0 seg1 cc=()
	local name=$tun-$loss-$dir json rc out ping_pid srv_pid
	local p_avg p_max p_loss mbit zero longest retr per
	json=$WORK/iperf-$name.json
	R[$key.mbit]=failed R[$key.stall]=- R[$key.ping]=-
	# -J: the client's --get-server-output then carries the server's
	# intervals as JSON, the receiver's view on upload.
	bg "iperf3-server-$name" "$NS_S" iperf3 -s -1 -J -p "$IPERF_PORT"
	srv_pid=$BG_PID
	wait_for 10 "iperf3 listening" iperf_listening || {
		log "iperf3 server does not start"
		stop_pid "$srv_pid"; forget_pid "$srv_pid"
		return 1
	}
	# Pings from the first second on, sent until a second before iperf3's
	# end. A count rather than a deadline ends the sending, so that the
	# last echoes still in flight are waited for instead of counted as
	# lost; the deadline (-w, two seconds after the last is sent) bounds
	# the wait whatever comes back.
	local pings=$(((BENCH_TIME > 3 ? BENCH_TIME - 2 : 1) * 10))
	(sleep 1 && exec ip netns exec "$NS_C" ping -n -i 0.1 -c "$pings" \
		-w $((pings / 10 + 2)) "$dest") >"$WORK/ping-$name.log" 2>&1 &
	ping_pid=$!
	E2E_PIDS+=("$ping_pid")
	rx_sampler "$rx_ns" "$rx_dev" $((BENCH_TIME + 16)) >"$WORK/rx-$name.log" &
	rx_pid=$!
	E2E_PIDS+=("$rx_pid")
	local rev=()
	[ "$dir" = down ] && rev=(-R) && tx_ns=$NS_S
	[ -n "${BENCH_INNER_CC:-}" ] && cc=(-C "$BENCH_INNER_CC")
	seg0=$(tcp_segs "$tx_ns")
	nsx "$NS_C" timeout -k 5 $((BENCH_TIME + 15)) iperf3 -c "$dest" -p "$IPERF_PORT" \
		-t "$BENCH_TIME" -i 1 -J --get-server-output --connect-timeout 5000 \
		"${cc[@]}" "${rev[@]}" >"$json" 2>"$WORK/iperf-$name.err"
	rc=$?
	seg1=$(tcp_segs "$tx_ns")
	R[$key.retrans]=$(awk -v a="$seg0" -v b="$seg1" 'BEGIN {
		split(a, x, " "); split(b, y, " "); o = y[1] - x[1]; r = y[2] - x[2];
		if (o > 0) printf "%.3f", 100 * r / o; else print "-" }')
	wait_exit "$ping_pid" 10
	stop_pid "$rx_pid"
	forget_pid "$rx_pid"
	stop_pid "$srv_pid"
	forget_pid "$srv_pid"
	read -r p_avg p_max p_loss < <(ping_stats "$WORK/ping-$name.log")
	R[$key.ping]="$p_avg/$p_max"
	[ "$p_avg" = - ] && R[$key.ping]="no reply"
	if [ $rc -eq 0 ] && out=$(parse_iperf "$json" "$dir" 2>/dev/null); then
		read -r mbit zero longest retr per <<<"$out"
		R[$key.mbit]=$mbit
		[ "$zero" -gt 0 ] && R[$key.stall]="$zero s (longest $longest s)"
	elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		R[$key.mbit]=stall
		R[$key.stall]="iperf3 cut off after $((BENCH_TIME + 15)) s"
		mbit=stall zero=- longest=- retr=- per=-
		per="(receiving interface) $(rx_rates "$WORK/rx-$name.log" "$BENCH_TIME")"
	else
		mbit=failed zero=- longest=- retr=- per=-
		per="(receiving interface) $(rx_rates "$WORK/rx-$name.log" "$BENCH_TIME")"
		log "iperf3 ($name) failed (exit $rc): $(head -c 300 "$WORK/iperf-$name.err" "$json")"
	fi
	case $mbit in [0-9]*) mbit="$mbit Mbit/s" ;; esac
	RAW+=("$(printf '%-8s %4s%% %-4s  %13s  zero-byte s %s (longest %s)  retransmits %s (%s%% of segments)  ping avg/max %s/%s ms, lost %s  Mbit/s per second: %s' \
		"$tun" "$loss" "$dir" "$mbit" "$zero" "$longest" "$retr" "${R[$key.retrans]}" "$p_avg" "$p_max" "$p_loss" "$per")")
	log "${RAW[-1]}"
}

# measure TUNNEL LOSS DIR: a fresh tunnel, one run, the tunnel removed.
measure() {
	local tun=$1 loss=$2 dir=$3 key=$1.$2.$3
	case $tun in
	rove|rove-off)
		if rove_recovery_up "$([ "$tun" = rove ] && echo auto || echo off)"; then
			if [ "$dir" = up ]; then
				run_iperf "$tun" "$loss" "$dir" "$SRV_TUN4" "$NS_S" rove0
			else
				run_iperf "$tun" "$loss" "$dir" "$SRV_TUN4" "$NS_C" rove0
			fi
			local st sender
			st=$(status "$NS_S" "$ROVED_SOCK" 2>/dev/null)
			RAW+=("$(printf '%-8s %4s%% %-4s  roved: datagrams lost %s, drops %s, loss recovery %s' \
				"$tun" "$loss" "$dir" \
				"$(jget 'peers[name=laptop].datagrams_lost' <<<"$st" 2>/dev/null)" \
				"$(jget drops <<<"$st" 2>/dev/null)" \
				"$(jget 'peers[name=laptop].loss_recovery' <<<"$st" 2>/dev/null)")")
			# The sending end's repair bytes per byte of data.
			if [ "$dir" = up ]; then
				sender=$(status "$NS_C" "$LAP_SOCK" 2>/dev/null | jget 'peers[0]' 2>/dev/null)
			else
				sender=$(jget 'peers[name=laptop]' <<<"$st" 2>/dev/null)
			fi
			R[$key.repair]=$(printf '%s\n' "$sender" | "$PY" -c '
import json, sys
try:
    p = json.load(sys.stdin)
    r = p.get("loss_recovery", {}).get("repair_bytes", 0)
    print("%.3f" % (r / p["tx_bytes"]) if p.get("tx_bytes") else "-")
except (ValueError, KeyError, AttributeError):
    print("-")')
		else
			log "rove's tunnel did not come up ($loss% loss, $dir)"
			R[$key.mbit]=failed R[$key.stall]=- R[$key.ping]=-
		fi
		rove_down
		;;
	wg)
		if wg_up n "$WG_NEW_BIN" "$NS_S" "$NS_C" "$S_ADDR"; then
			if [ "$dir" = up ]; then
				run_iperf wg "$loss" "$dir" "$WG_S_ADDR" "$NS_S" "$WG_IF_S"
			else
				run_iperf wg "$loss" "$dir" "$WG_S_ADDR" "$NS_C" "$WG_IF_C"
			fi
		else
			log "wireguard-go's tunnel did not come up ($loss% loss, $dir)"
			R[$key.mbit]=failed R[$key.stall]=- R[$key.ping]=-
		fi
		wg_down
		;;
	esac
}

# keep_run KEY: add the run just measured to KEY's list of runs (a stalled
# or failed run counts as 0 Mbit/s for the median).
keep_run() {
	local v=${R[$1.mbit]}
	case $v in [0-9]*) ;; *) v=0 ;; esac
	R[$1.runs]="${R[$1.runs]:-}${R[$1.runs]:+ }$v"
	R[$1.retrs]="${R[$1.retrs]:-}${R[$1.retrs]:+ }${R[$1.retrans]:--}"
	R[$1.repairs]="${R[$1.repairs]:-}${R[$1.repairs]:+ }${R[$1.repair]:--}"
	R[$1.pings]="${R[$1.pings]:-}${R[$1.pings]:+ }${R[$1.ping]}"
	[ "${R[$1.stall]}" = - ] ||
		R[$1.stalls]="${R[$1.stalls]:-}${R[$1.stalls]:+; }${R[$1.stall]}"
}

# settle_runs KEY: KEY's figures become the median run's, every stall kept.
settle_runs() {
	local med
	med=$(printf '%s\n' ${R[$1.runs]} | sort -g | awk '{ v[NR] = $1 }
		END { if (NR % 2) print v[(NR + 1) / 2];
		      else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
	R[$1.mbit]=$med
	R[$1.stall]=${R[$1.stalls]:--}
	[ "$BENCH_RUNS" -gt 1 ] &&
		RAW+=("$(printf '%-5s %s: runs %s Mbit/s, median %s' "${1%%.*}" "${1#*.}" "${R[$1.runs]}" "$med")")
	return 0
}

START=$(date +%s)
OUTER=()
for loss in $BENCH_LOSS; do
	log "--- $loss% loss, ${BENCH_DELAY} ms each way"
	if ! relay_start "$loss"; then
		for dir in up down; do
			for tun in $BENCH_TUNNELS; do
				R[$tun.$loss.$dir.mbit]=failed R[$tun.$loss.$dir.stall]=- R[$tun.$loss.$dir.ping]=-
			done
		done
		relay_stop
		continue
	fi
	out=$(nsx "$NS_C" ping -n -q -c 20 -i 0.05 -W 1 "$S_ADDR" 2>&1)
	OUTER+=("$loss% loss: outer ping $(printf '%s\n' "$out" | sed -n 's/.* \([0-9.]*%\) packet loss.*/lost \1/p'), rtt min/avg/max $(printf '%s\n' "$out" | sed -n 's|^rtt min/avg/max/mdev = \([^/]*\)/\([^/]*\)/\([^/]*\)/.*|\1/\2/\3|p') ms")
	log "${OUTER[-1]}"
	for dir in up down; do
		for ((run = 1; run <= BENCH_RUNS; run++)); do
			for tun in $BENCH_TUNNELS; do
				measure "$tun" "$loss" "$dir"
				keep_run "$tun.$loss.$dir"
			done
		done
		for tun in $BENCH_TUNNELS; do
			settle_runs "$tun.$loss.$dir"
		done
	done
	relay_stop
done
ELAPSED=$(($(date +%s) - START))

# ratio A B: A / B to two places, or "-".
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.2f", a / b;
		else printf "-" }'
}
# med3 RUNS...: the median to three places, or "-" without a figure.
med3() {
	local m
	m=$(median 3 "$@")
	[ "$m" = failed ] && m=-
	echo "$m"
}

echo
echo "lossy link: $((2 * BENCH_DELAY)) ms RTT, loss per direction (seed $BENCH_SEED; RbB: R% in bursts of B), one iperf3 TCP stream for $BENCH_TIME s per run, median of $BENCH_RUNS run(s); $(nproc) CPUs, kernel $(uname -r)"
INNER=${BENCH_INNER_CC:-$(sysctl -n net.ipv4.tcp_congestion_control) (the host default)}
echo "rove: over $([ "$BENCH_TRANSPORT" = tcp ] && echo "TLS on TCP (TCP inside TCP)" || echo QUIC), congestion control ${BENCH_CC:-bbr (default)}; inner TCP: $INNER"
echo "wireguard-go: ${WG_NEW_VER:-missing} (trixie, offloads); rove-off: LossRecovery = off at both ends"
echo "Mbit/s as the receiver counts them; retr: the sender's TCP segments retransmitted, %; repair: rove's repair bytes per data byte; ping through the tunnel during the run"
echo
printf '| loss | dir |'
for tun in $BENCH_TUNNELS; do printf ' %s Mbit/s |' "$tun"; done
has_tun() { case " $BENCH_TUNNELS " in *" $1 "*) return 0 ;; esac; return 1; }
has_tun wg && has_tun rove && printf ' rove / wg |'
has_tun rove-off && has_tun rove && printf ' rove / off |'
for tun in $BENCH_TUNNELS; do printf ' %s retr %% |' "$tun"; done
has_tun rove && printf ' rove repair |'
for tun in $BENCH_TUNNELS; do printf ' %s ping avg/max ms |' "$tun"; done
echo
printf '|---|---|'
for tun in $BENCH_TUNNELS; do printf -- '---|---|---|'; done
has_tun wg && has_tun rove && printf -- '---|'
has_tun rove-off && has_tun rove && printf -- '---|'
has_tun rove && printf -- '---|'
echo
STALLS=()
for loss in $BENCH_LOSS; do
	for dir in up down; do
		printf '| %s%% | %s |' "$loss" "$dir"
		for tun in $BENCH_TUNNELS; do
			# A figure from a run that stalled carries a star.
			v=${R[$tun.$loss.$dir.mbit]}
			[ "${R[$tun.$loss.$dir.stall]}" = - ] || [ "$v" = stall ] || v="$v*"
			printf ' %s |' "$v"
			[ "${R[$tun.$loss.$dir.stall]}" = - ] ||
				STALLS+=("$tun $loss% $dir: ${R[$tun.$loss.$dir.stall]}")
		done
		has_tun wg && has_tun rove &&
			printf ' %s |' "$(ratio "${R[rove.$loss.$dir.mbit]}" "${R[wg.$loss.$dir.mbit]}")"
		has_tun rove-off && has_tun rove &&
			printf ' %s |' "$(ratio "${R[rove.$loss.$dir.mbit]}" "${R[rove-off.$loss.$dir.mbit]}")"
		for tun in $BENCH_TUNNELS; do
			# shellcheck disable=SC2086 # the runs are a list
			printf ' %s |' "$(med3 ${R[$tun.$loss.$dir.retrs]:-})"
		done
		# shellcheck disable=SC2086
		has_tun rove && printf ' %s |' "$(med3 ${R[rove.$loss.$dir.repairs]:-})"
		for tun in $BENCH_TUNNELS; do printf ' %s |' "${R[$tun.$loss.$dir.ping]}"; done
		echo
	done
done
echo
if [ ${#STALLS[@]} -eq 0 ]; then
	echo "stalls (a 1-second interval in which the receiver got nothing): none"
else
	echo "stalls (*: a 1-second interval in which the receiver got nothing):"
	printf '  %s\n' "${STALLS[@]}"
fi
echo
echo "raw figures:"
printf '  %s\n' "${OUTER[@]}" "${RAW[@]}"
echo "measured in ${ELAPSED} s"
e2e_finish
