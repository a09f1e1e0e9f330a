#!/usr/bin/env bash
# Throughput, latency and CPU cost of rove against the raw link and
# wireguard-go, measured in one run between two network namespaces.
#
# usage: bench/run.sh BUILD_DIR
#   BENCH_TIME=SECONDS  length of each iperf3 run (default 10)
#   BENCH_ONLY="raw wg wgold rove roveoff rovenorec"  which paths to measure
#                       (default all)
#
#   $NS_C (client) eth0 198.18.1.2/24 <---- veth ----> eth0 198.18.1.1/24 $NS_S (server)
#   raw:          iperf3 to 198.18.1.1
#   wg:           trixie's wireguard-go (TUN TSO/GRO, UDP GSO/GRO; fetched
#                 by scripts/wireguard-go.sh), 198.18.100.2 -> 198.18.100.1,
#                 MTU 1420, UDP 51820; the row the ratios are taken against
#   wgold:        bookworm's wireguard-go (no offloads), same tunnel
#   rove:         rove (configs/rove.conf) -> roved (configs/roved.conf),
#                 198.19.77.2 -> 198.19.77.1, MTU 1380, Offload = auto
#   roveoff:      the same with Offload = off on both ends (one IP packet
#                 per TUN read and write)
#   rovenorec:    rove with LossRecovery = off on both ends: on a clean
#                 link loss recovery must cost nothing
#
# For each path: iperf3 TCP with 1 stream and with 4 streams (-P 4), ping
# RTT (average of 50 pings 10 ms apart) idle and while the 1-stream run
# saturates the path, CPU seconds per GB: the user + system time of both
# tunnel processes (from /proc/PID/stat) during an iperf3 run, divided by
# the gigabytes it moved, and system calls per GB of both tunnel
# processes during the 1-stream run (perf stat on raw_syscalls:sys_enter,
# when perf is installed; linux-perf).
. "$(dirname "$0")/../tests/e2e/lib.sh"
# shellcheck source=bench/lib-measure.sh
. "$(dirname "$0")/lib-measure.sh"
# shellcheck source=bench/lib-path.sh
. "$(dirname "$0")/lib-path.sh"
# shellcheck source=bench/lib-wg.sh
. "$(dirname "$0")/lib-wg.sh"
TEST_NAME=bench
BENCH_TIME=${BENCH_TIME:-10}
BENCH_ONLY=${BENCH_ONLY:-raw wg wgold rove roveoff rovenorec}
PATHS="raw wg wgold rove roveoff rovenorec"

e2e_init "$@"
wg_find
for p in iperf3 ping; do
	command -v $p >/dev/null || die "$p is not installed (scripts/deps.sh installs it)"
done

veth_topo_up

# run_iperf NAME DEST STREAMS PID...: iperf3 from the client to DEST for
# $BENCH_TIME s; sets GBPS and CPU_PER_GB (CPU of the PIDs; "-" without).
run_iperf() {
	local name=$1 dest=$2 streams=$3
	shift 3
	local json=$WORK/iperf-$name-$streams.json c0 c1 bytes
	GBPS=failed
	CPU_PER_GB=-
	local perf_out=$WORK/perf-$name-$streams.csv perf_pid= ping_pid=
	local ping_out=$WORK/ping-load-$name-$streams.txt
	SYSCALLS_PER_GB=- LOAD_RTT=-
	c0=$( [ $# -gt 0 ] && cpu_ticks "$@")
	# With one stream: the tunnel's system calls, and a ping beside the
	# load (started after iperf3 has ramped up, ended before it stops).
	if [ "$streams" = 1 ]; then
		if [ $# -gt 0 ] && command -v perf >/dev/null; then
			perf stat -x, -e raw_syscalls:sys_enter -p "$(IFS=,; echo "$*")" \
				-o "$perf_out" -- sleep $((BENCH_TIME + 5)) >/dev/null 2>&1 &
			perf_pid=$!
		fi
		( sleep 1; nsx "$NS_C" ping -n -q -c $(((BENCH_TIME - 2) * 50)) -i 0.02 -W 2 \
			"$dest" >"$ping_out" 2>&1 ) &
		ping_pid=$!
	fi
	if ! nsx "$NS_C" timeout $((BENCH_TIME + 30)) iperf3 -c "$dest" -t "$BENCH_TIME" \
		-P "$streams" -J >"$json" 2>"$WORK/iperf-$name-$streams.err"; then
		log "iperf3 to $dest ($name, $streams streams) failed: $(head -c 300 "$json" "$WORK/iperf-$name-$streams.err")"
		[ -n "$perf_pid" ] && kill -INT "$perf_pid" 2>/dev/null
		return 1
	fi
	c1=$( [ $# -gt 0 ] && cpu_ticks "$@")
	if [ -n "$perf_pid" ]; then
		kill -INT "$perf_pid" 2>/dev/null
		wait "$perf_pid" 2>/dev/null
	fi
	if [ -n "$ping_pid" ]; then
		wait "$ping_pid"
		LOAD_RTT=$(sed -n 's|^rtt min/avg/max/mdev = [^/]*/\([^/]*\)/.*|\1|p' "$ping_out")
		LOAD_RTT=${LOAD_RTT:-failed}
	fi
	read -r GBPS bytes < <(iperf_received "$json")
	if [ $# -gt 0 ] && [ "$bytes" -gt 0 ]; then
		CPU_PER_GB=$(cpu_per_gb $((c1 - c0)) "$bytes")
	fi
	# perf -x, prints "COUNT,,EVENT,..."; the count covers a little more
	# than the run (perf starts first), which only overstates it.
	if [ -s "$perf_out" ] && [ "$bytes" -gt 0 ]; then
		SYSCALLS_PER_GB=$(awk -F, -v b="$bytes" '$3 ~ /raw_syscalls:sys_enter/ && $1 ~ /^[0-9]+$/ {
			printf "%.0f", $1 / (b / 1e9) }' "$perf_out")
		SYSCALLS_PER_GB=${SYSCALLS_PER_GB:--}
	fi
	log "$name, $streams stream(s): $GBPS Gbit/s, $CPU_PER_GB CPU s/GB, $SYSCALLS_PER_GB syscalls/GB, ping under load $LOAD_RTT ms"
}

# run_ping NAME DEST: average RTT in ms of 50 pings 10 ms apart, in RTT.
run_ping() {
	local out
	RTT=failed
	out=$(nsx "$NS_C" ping -n -q -c 50 -i 0.01 -W 2 "$2" 2>&1) || {
		log "ping $2 ($1) failed: $out"
		return 1
	}
	RTT=$(printf '%s\n' "$out" | sed -n 's|^rtt min/avg/max/mdev = [^/]*/\([^/]*\)/.*|\1|p')
	log "$1: ping RTT avg $RTT ms"
}

# Results: R[PATH.rtt], R[PATH.g1] / R[PATH.c1] (Gbit/s and CPU s/GB with
# one stream), R[PATH.g4] / R[PATH.c4] (four streams), R[PATH.sc]
# (system calls per GB, one stream), R[PATH.lrtt] (ping under load).
declare -A R
FIELDS="rtt g1 c1 g4 c4 sc lrtt"
for key in $PATHS; do
	for f in $FIELDS; do R[$key.$f]=skipped; done
done

# measure KEY DEST PID...: the numbers of one path into R.
measure() {
	local key=$1 dest=$2
	shift 2
	run_ping "$key" "$dest"
	R[$key.rtt]=$RTT
	run_iperf "$key" "$dest" 1 "$@"
	R[$key.g1]=$GBPS R[$key.c1]=$CPU_PER_GB
	R[$key.sc]=$SYSCALLS_PER_GB R[$key.lrtt]=$LOAD_RTT
	run_iperf "$key" "$dest" 4 "$@"
	R[$key.g4]=$GBPS R[$key.c4]=$CPU_PER_GB
}

# failed KEY: the path could not be measured.
failed() {
	local f
	for f in $FIELDS; do R[$1.$f]=failed; done
}

bg iperf3-server "$NS_S" iperf3 -s
iperf_listening() { nsx "$NS_S" ss -Hltn 'sport = :5201' | grep -q 5201; }
wait_for 10 "iperf3 listening" iperf_listening || die "iperf3 server does not start"

# --- the raw veth link
if [[ " $BENCH_ONLY " == *" raw "* ]]; then
	log "raw veth"
	measure raw "$SRV_OUTER"
fi

# --- wireguard-go: trixie's, then bookworm's
# wg_measure KEY BIN: one wireguard-go build's tunnel, measured and removed.
wg_measure() {
	local key=$1 bin=$2
	[[ " $BENCH_ONLY " == *" $key "* ]] || return 0
	log "wireguard-go ($key): ${bin:-missing}"
	if wg_up "$key" "$bin" "$NS_S" "$NS_C" "$SRV_OUTER"; then
		measure "$key" "$WG_S_ADDR" "$WG_S_PID" "$WG_C_PID"
	else
		log "wireguard-go tunnel ($key) did not come up"
		failed "$key"
	fi
	wg_down
}
wg_measure wg "$WG_NEW_BIN"
wg_measure wgold "$WG_OLD_BIN"

# --- rove, with TUN offloads (as configured) and without
# rove_measure KEY [CONFIG LINE]: one rove tunnel, measured and stopped.
rove_measure() {
	local key=$1 line=${2:-} c=$WORK/configs
	[[ " $BENCH_ONLY " == *" $key "* ]] || return 0
	log "rove ($key${line:+: $line})"
	cp "$c/roved.conf" "$c/roved-$key.conf"
	cp "$c/rove.conf" "$c/rove-$key.conf"
	# KEY = VALUE replaces the key where the config has it, else goes
	# into the main section.
	if [ -n "$line" ]; then
		local k=${line%% =*} f sec
		for f in "$c/roved-$key.conf:Server" "$c/rove-$key.conf:Client"; do
			sec=${f##*:} f=${f%:*}
			if grep -q "^$k[[:space:]]*=" "$f"; then
				sed -i "s|^$k[[:space:]]*=.*|$line|" "$f"
			else
				sed -i "/^\[$sec\]/a $line" "$f"
			fi
		done
	fi
	start_roved "$c/roved-$key.conf"
	start_client laptop "$c/rove-$key.conf"
	if wait_established laptop; then
		measure "$key" "$SRV_TUN4" "$ROVED_PID" "$LAP_PID"
		status "$NS_S" "$ROVED_SOCK" >"$WORK/roved-status-$key.json"
		log "roved drops: $(jget drops <"$WORK/roved-status-$key.json"), datagrams lost: $(jget 'peers[name=laptop].datagrams_lost' <"$WORK/roved-status-$key.json")"
	else
		log "rove tunnel ($key) did not come up"
		failed "$key"
	fi
	stop_pid "$LAP_PID"; forget_pid "$LAP_PID"
	stop_pid "$ROVED_PID"; forget_pid "$ROVED_PID"
	mv "$WORK/laptop.log" "$WORK/laptop-$key.log"
	mv "$WORK/roved.log" "$WORK/roved-$key.log"
}
rove_measure rove
rove_measure roveoff "Offload = off"
rove_measure rovenorec "LossRecovery = off"

# ratio A B: A / B to two places, or "-".
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.2f", a / b;
		else printf "-" }'
}

# label KEY: a row's name in the table.
label() {
	case $1 in
	raw) echo "raw veth" ;;
	wg) echo "wireguard-go ${WG_NEW_VER:-?} (trixie, offloads)" ;;
	wgold) echo "wireguard-go ${WG_OLD_VER:-?} (bookworm)" ;;
	rove) echo "rove (Offload = auto)" ;;
	roveoff) echo "rove (Offload = off)" ;;
	rovenorec) echo "rove (LossRecovery = off)" ;;
	esac
}
row() { printf '%-44s %10s %10s %10s %11s %8s %9s %11s\n' "$@"; }

echo
echo "rove benchmark: $BENCH_TIME s per iperf3 run, $(nproc) CPUs, kernel $(uname -r)"
row path "1 stream" "CPU s/GB" "4 streams" "CPU s/GB" "RTT" "RTT load" "syscalls/GB"
row "" "Gbit/s" "(1 stream)" "Gbit/s" "(4 streams)" "avg ms" "avg ms" "(1 stream)"
for key in $PATHS; do
	row "$(label "$key")" "${R[$key.g1]}" "${R[$key.c1]}" "${R[$key.g4]}" \
		"${R[$key.c4]}" "${R[$key.rtt]}" "${R[$key.lrtt]}" "${R[$key.sc]}"
done
echo
row "ratio" "1 stream" "CPU s/GB" "4 streams" "CPU s/GB" "RTT" "RTT load" "syscalls/GB"
# ratios KEY_A KEY_B: a row of A / B.
ratios() {
	row "$3" "$(ratio "${R[$1.g1]}" "${R[$2.g1]}")" "$(ratio "${R[$1.c1]}" "${R[$2.c1]}")" \
		"$(ratio "${R[$1.g4]}" "${R[$2.g4]}")" "$(ratio "${R[$1.c4]}" "${R[$2.c4]}")" \
		"$(ratio "${R[$1.rtt]}" "${R[$2.rtt]}")" "$(ratio "${R[$1.lrtt]}" "${R[$2.lrtt]}")" \
		"$(ratio "${R[$1.sc]}" "${R[$2.sc]}")"
}
ratios rove wg "rove / wireguard-go ${WG_NEW_VER:-?} (trixie)"
ratios roveoff wg "rove (Offload = off) / wireguard-go (trixie)"
ratios rove roveoff "rove: Offload = auto / off"
ratios rove rovenorec "rove: LossRecovery = auto / off"
ratios wgold wg "wireguard-go bookworm / trixie"
ratios rove raw "rove / raw"

for key in $PATHS; do
	if [[ " $BENCH_ONLY " == *" $key "* ]]; then
		for f in rtt g1 g4; do
			if [ "${R[$key.$f]}" = failed ]; then
				fail "$key: a measurement failed"
				break
			fi
		done
	fi
done
e2e_finish
