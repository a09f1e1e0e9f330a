#!/usr/bin/env bash
# Throughput, latency and CPU cost of rove against the raw link and
# wireguard-go, measured in one run between two network namespaces.
#
# usage: bench/run.sh BUILD_DIR
#   BENCH_TIME=SECONDS  length of each iperf3 run (default 10)
#   BENCH_ONLY="raw wg wgold rove"  which paths to measure (default all)
#
#   $NS_C (client) eth0 198.18.1.2/24 <---- veth ----> eth0 198.18.1.1/24 $NS_S (server)
#   raw:          iperf3 to 198.18.1.1
#   wg:           trixie's wireguard-go (TUN TSO/GRO, UDP GSO/GRO; fetched
#                 by scripts/wireguard-go.sh), 198.18.100.2 -> 198.18.100.1,
#                 MTU 1420, UDP 51820; the row the ratios are taken against
#   wgold:        bookworm's wireguard-go (no offloads), same tunnel
#   rove:         rove (configs/rove.conf) -> roved (configs/roved.conf),
#                 198.19.77.2 -> 198.19.77.1, MTU 1380
#
# For each path: iperf3 TCP with 1 stream and with 4 streams (-P 4), ping
# RTT (average of 50 pings 10 ms apart), and CPU seconds per GB: the user +
# system time of both tunnel processes (from /proc/PID/stat) during an
# iperf3 run, divided by the gigabytes it moved.
. "$(dirname "$0")/../tests/e2e/lib.sh"
# shellcheck source=bench/lib-wg.sh
. "$(dirname "$0")/lib-wg.sh"
TEST_NAME=bench
BENCH_TIME=${BENCH_TIME:-10}
BENCH_ONLY=${BENCH_ONLY:-raw wg wgold rove}
PATHS="raw wg wgold rove"

e2e_init "$@"
wg_find
for p in iperf3 ping; do
	command -v $p >/dev/null || die "$p is not installed (scripts/deps.sh installs it)"
done

NS_C=$NS_LAP
NS_S=$NS_SRV
ns_add "$NS_S"
ns_add "$NS_C"
veth "$NS_C" eth0 "$NS_S" eth0
ip -n "$NS_S" addr add "$SRV_OUTER/24" dev eth0
ip -n "$NS_C" addr add "$LAP_OUTER/24" dev eth0
veth_pings() { nsx "$NS_C" ping -c 1 -W 1 "$SRV_OUTER" >/dev/null 2>&1; }
wait_for 10 "the veth link" veth_pings ||
	die "the veth link does not come up"

HZ=$(getconf CLK_TCK)

# cpu_ticks PID...: utime + stime of the processes, in clock ticks.
cpu_ticks() {
	local pid sum=0 f
	for pid in "$@"; do
		# Fields 14 and 15; the command name (field 2) may hold spaces,
		# so split after its closing parenthesis (field 3 is f[0]).
		read -r -a f < <(sed 's/.*) //' "/proc/$pid/stat") || return 1
		sum=$((sum + f[11] + f[12]))
	done
	echo "$sum"
}

# run_iperf NAME DEST STREAMS PID...: iperf3 from the client to DEST for
# $BENCH_TIME s; sets GBPS and CPU_PER_GB (CPU of the PIDs; "-" without).
run_iperf() {
	local name=$1 dest=$2 streams=$3
	shift 3
	local json=$WORK/iperf-$name-$streams.json c0 c1 bytes
	GBPS=failed
	CPU_PER_GB=-
	c0=$( [ $# -gt 0 ] && cpu_ticks "$@")
	if ! nsx "$NS_C" timeout $((BENCH_TIME + 30)) iperf3 -c "$dest" -t "$BENCH_TIME" \
		-P "$streams" -J >"$json" 2>"$WORK/iperf-$name-$streams.err"; then
		log "iperf3 to $dest ($name, $streams streams) failed: $(head -c 300 "$json" "$WORK/iperf-$name-$streams.err")"
		return 1
	fi
	c1=$( [ $# -gt 0 ] && cpu_ticks "$@")
	read -r GBPS bytes < <("$PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))["end"]["sum_received"]
print("%.3f %d" % (r["bits_per_second"] / 1e9, r["bytes"]))' "$json")
	if [ $# -gt 0 ] && [ "$bytes" -gt 0 ]; then
		CPU_PER_GB=$(awk -v t=$((c1 - c0)) -v hz="$HZ" -v b="$bytes" \
			'BEGIN { printf "%.2f", t / hz / (b / 1e9) }')
	fi
	log "$name, $streams stream(s): $GBPS Gbit/s, $CPU_PER_GB CPU s/GB"
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
# one stream), R[PATH.g4] / R[PATH.c4] (four streams).
declare -A R
for key in $PATHS; do
	for f in rtt g1 c1 g4 c4; do R[$key.$f]=skipped; done
done

# measure KEY DEST PID...: the numbers of one path into R.
measure() {
	local key=$1 dest=$2
	shift 2
	run_ping "$key" "$dest"
	R[$key.rtt]=$RTT
	run_iperf "$key" "$dest" 1 "$@"
	R[$key.g1]=$GBPS R[$key.c1]=$CPU_PER_GB
	run_iperf "$key" "$dest" 4 "$@"
	R[$key.g4]=$GBPS R[$key.c4]=$CPU_PER_GB
}

# failed KEY: the path could not be measured.
failed() {
	local f
	for f in rtt g1 c1 g4 c4; do R[$1.$f]=failed; done
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

# --- rove
if [[ " $BENCH_ONLY " == *" rove "* ]]; then
	log "rove"
	start_roved
	start_client laptop
	if wait_established laptop; then
		measure rove "$SRV_TUN4" "$ROVED_PID" "$LAP_PID"
		status "$NS_S" "$ROVED_SOCK" >"$WORK/roved-status.json"
		log "roved drops: $(jget drops <"$WORK/roved-status.json"), datagrams lost: $(jget 'peers[name=laptop].datagrams_lost' <"$WORK/roved-status.json")"
	else
		log "rove tunnel did not come up"
		failed rove
	fi
fi

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
	rove) echo rove ;;
	esac
}
row() { printf '%-44s %10s %10s %10s %11s %8s\n' "$@"; }

echo
echo "rove benchmark: $BENCH_TIME s per iperf3 run, $(nproc) CPUs, kernel $(uname -r)"
row path "1 stream" "CPU s/GB" "4 streams" "CPU s/GB" "RTT"
row "" "Gbit/s" "(1 stream)" "Gbit/s" "(4 streams)" "avg ms"
for key in $PATHS; do
	row "$(label "$key")" "${R[$key.g1]}" "${R[$key.c1]}" "${R[$key.g4]}" \
		"${R[$key.c4]}" "${R[$key.rtt]}"
done
echo
row "ratio" "1 stream" "CPU s/GB" "4 streams" "CPU s/GB" "RTT"
# ratios KEY_A KEY_B: a row of A / B.
ratios() {
	row "$3" "$(ratio "${R[$1.g1]}" "${R[$2.g1]}")" "$(ratio "${R[$1.c1]}" "${R[$2.c1]}")" \
		"$(ratio "${R[$1.g4]}" "${R[$2.g4]}")" "$(ratio "${R[$1.c4]}" "${R[$2.c4]}")" \
		"$(ratio "${R[$1.rtt]}" "${R[$2.rtt]}")"
}
ratios rove wg "rove / wireguard-go ${WG_NEW_VER:-?} (trixie)"
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
