#!/usr/bin/env bash
# Throughput, latency and CPU cost of rove against the raw link and
# wireguard-go, measured in one run between two network namespaces.
#
# usage: bench/run.sh BUILD_DIR
#   BENCH_TIME=SECONDS  length of each iperf3 run (default 10)
#   BENCH_ONLY="raw wg rove"  which paths to measure (default all three)
#
#   $NS_C (client) eth0 198.18.1.2/24 <---- veth ----> eth0 198.18.1.1/24 $NS_S (server)
#   raw:          iperf3 to 198.18.1.1
#   wireguard-go: wg tunnel 198.18.100.2 -> 198.18.100.1, MTU 1420, UDP 51820
#   rove:         rove (configs/rove.conf) -> roved (configs/roved.conf),
#                 198.19.77.2 -> 198.19.77.1, MTU 1380
#
# For each path: iperf3 TCP with 1 stream and with 4 streams (-P 4), ping
# RTT (average of 50 pings 10 ms apart), and CPU seconds per GB: the user +
# system time of both tunnel processes (from /proc/PID/stat) during an
# iperf3 run, divided by the gigabytes it moved.
. "$(dirname "$0")/../tests/e2e/lib.sh"
TEST_NAME=bench
BENCH_TIME=${BENCH_TIME:-10}
BENCH_ONLY=${BENCH_ONLY:-raw wg rove}

# wireguard-go and wg come from Debian; install them when missing.
if ! command -v wireguard-go >/dev/null || ! command -v wg >/dev/null; then
	if [ "$(id -u)" -eq 0 ]; then
		log "installing wireguard-go and wireguard-tools"
		apt-get update -qq &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				--no-install-recommends wireguard-go wireguard-tools >/dev/null ||
			echo "bench: cannot install wireguard-go; its row will be missing" >&2
	fi
fi
e2e_init "$@"
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
for key in raw wg rove; do
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

# --- wireguard-go
WG_S=wgb$$s
WG_C=wgb$$c
wg_links() {
	ip -n "$NS_S" link show "$WG_S" >/dev/null 2>&1 &&
		ip -n "$NS_C" link show "$WG_C" >/dev/null 2>&1
}
wg_up() {
	local s=$WG_S c=$WG_C sk=$WORK/wg-s.key ck=$WORK/wg-c.key
	command -v wireguard-go >/dev/null || { log "wireguard-go is not installed"; return 1; }
	(umask 077 && wg genkey >"$sk" && wg genkey >"$ck") || return 1
	# Foreground, so that $! is the process to measure and stop. The
	# interface names are unique because the UAPI sockets in
	# /var/run/wireguard are shared by all namespaces.
	bg wg-server "$NS_S" env WG_PROCESS_FOREGROUND=1 \
		WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1 wireguard-go -f "$s"
	WG_S_PID=$BG_PID
	bg wg-client "$NS_C" env WG_PROCESS_FOREGROUND=1 \
		WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1 wireguard-go -f "$c"
	WG_C_PID=$BG_PID
	wait_for 10 "wireguard-go interfaces" wg_links || return 1
	nsx "$NS_S" wg set "$s" listen-port 51820 private-key "$sk" \
		peer "$(wg pubkey <"$ck")" allowed-ips 198.18.100.2/32 || return 1
	nsx "$NS_C" wg set "$c" private-key "$ck" \
		peer "$(wg pubkey <"$sk")" endpoint "$SRV_OUTER:51820" \
		allowed-ips 198.18.100.0/24 || return 1
	ip -n "$NS_S" addr add 198.18.100.1/24 dev "$s"
	ip -n "$NS_C" addr add 198.18.100.2/24 dev "$c"
	ip -n "$NS_S" link set "$s" mtu 1420 up
	ip -n "$NS_C" link set "$c" mtu 1420 up
	wait_for 10 "a ping through wireguard-go" wg_pings
}
wg_pings() { nsx "$NS_C" ping -c 1 -W 1 198.18.100.1 >/dev/null 2>&1; }
if [[ " $BENCH_ONLY " == *" wg "* ]]; then
	log "wireguard-go"
	if wg_up; then
		measure wg 198.18.100.1 "$WG_S_PID" "$WG_C_PID"
	else
		log "wireguard-go tunnel did not come up"
		failed wg
	fi
	[ -n "${WG_C_PID:-}" ] && { stop_pid "$WG_C_PID"; forget_pid "$WG_C_PID"; }
	[ -n "${WG_S_PID:-}" ] && { stop_pid "$WG_S_PID"; forget_pid "$WG_S_PID"; }
fi

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

echo
echo "rove benchmark: $BENCH_TIME s per iperf3 run, $(nproc) CPUs, kernel $(uname -r)"
printf '%-14s %12s %12s %12s %12s %10s\n' path "1 stream" "CPU s/GB" "4 streams" "CPU s/GB" "RTT"
printf '%-14s %12s %12s %12s %12s %10s\n' "" "Gbit/s" "(1 stream)" "Gbit/s" "(4 streams)" "avg ms"
for key in raw wg rove; do
	case $key in raw) label="raw veth" ;; wg) label=wireguard-go ;; rove) label=rove ;; esac
	printf '%-14s %12s %12s %12s %12s %10s\n' "$label" "${R[$key.g1]}" \
		"${R[$key.c1]}" "${R[$key.g4]}" "${R[$key.c4]}" "${R[$key.rtt]}"
done
echo
printf '%-22s %12s %12s %12s %12s %10s\n' ratio "1 stream" "CPU s/GB" "4 streams" "CPU s/GB" "RTT"
printf '%-22s %12s %12s %12s %12s %10s\n' "rove / wireguard-go" \
	"$(ratio "${R[rove.g1]}" "${R[wg.g1]}")" "$(ratio "${R[rove.c1]}" "${R[wg.c1]}")" \
	"$(ratio "${R[rove.g4]}" "${R[wg.g4]}")" "$(ratio "${R[rove.c4]}" "${R[wg.c4]}")" \
	"$(ratio "${R[rove.rtt]}" "${R[wg.rtt]}")"
printf '%-22s %12s %12s %12s %12s %10s\n' "rove / raw" \
	"$(ratio "${R[rove.g1]}" "${R[raw.g1]}")" - \
	"$(ratio "${R[rove.g4]}" "${R[raw.g4]}")" - \
	"$(ratio "${R[rove.rtt]}" "${R[raw.rtt]}")"

for key in raw wg rove; do
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
