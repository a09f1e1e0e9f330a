#!/usr/bin/env bash
# Where the IP tunnel's CPU goes: the tunnel of bench/run.sh (rove ->
# roved over a veth between two namespaces), one iperf3 TCP run per
# direction, with perf sampling both programs and counting their system
# calls, so that a change can be argued from profiles and calls per GB
# rather than from a noisy throughput figure.
#
# usage: bench/profile.sh BUILD_DIR [OUT_DIR]
#   PROFILE_TIME=SECONDS   length of each iperf3 run (default 10)
#   PROFILE_STREAMS=N      iperf3 parallel streams (default 1)
#   PROFILE_DIRS="up down" up: client -> server; down: iperf3 -R
#   PROFILE_CG=fp|dwarf   record call graphs: frame pointers (the kernel's
#                          stacks) or DWARF unwinding (user space too; slower)
#   PROFILE_CC=bbr|cubic   Congestion of both programs (default: config's)
#
# For each direction OUT_DIR (default: a temporary directory, printed) gets
# perf-DIR.data, report-DIR-{roved,rove}.txt (top symbols), and the
# summary on standard output: Gbit/s, CPU s/GB of both programs (from
# /proc/PID/stat), and system calls per GB by name for each program.
. "$(dirname "$0")/../tests/e2e/lib.sh"
# shellcheck source=bench/lib-measure.sh
. "$(dirname "$0")/lib-measure.sh"
# shellcheck source=bench/lib-path.sh
. "$(dirname "$0")/lib-path.sh"
TEST_NAME=profile
PROFILE_TIME=${PROFILE_TIME:-10}
PROFILE_STREAMS=${PROFILE_STREAMS:-1}
PROFILE_DIRS=${PROFILE_DIRS:-up down}

e2e_init "$1"
OUT=${2:-$WORK/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
for p in iperf3 perf; do
	command -v $p >/dev/null || die "$p is not installed (apt-get install iperf3 linux-perf)"
done

if [ -n "${PROFILE_CC:-}" ]; then
	sed -i "s/^Congestion *=.*/Congestion = $PROFILE_CC/" "$WORK/configs/roved.conf"
	grep -q '^Congestion' "$WORK/configs/rove.conf" &&
		sed -i "s/^Congestion *=.*/Congestion = $PROFILE_CC/" "$WORK/configs/rove.conf" ||
		sed -i "/^\[Client\]/a Congestion = $PROFILE_CC" "$WORK/configs/rove.conf"
fi

veth_topo_up

bg iperf3-server "$NS_S" iperf3 -s
iperf_listening() { nsx "$NS_S" ss -Hltn 'sport = :5201' | grep -q 5201; }
wait_for 10 "iperf3 listening" iperf_listening || die "iperf3 server does not start"

start_roved
start_client laptop
wait_established laptop || die "the tunnel does not come up"
# Warm up: path MTU discovery and the congestion controller's start.
nsx "$NS_C" iperf3 -c "$SRV_TUN4" -t 2 >/dev/null 2>&1

# The calls that carry packets, and every call for the total; counting all
# ~350 tracepoints slows the programs more than the calls themselves.
events=raw_syscalls:sys_enter
for c in read write readv writev recvmsg recvmmsg sendmsg sendmmsg sendto \
	epoll_wait epoll_pwait timerfd_settime; do
	perf list "syscalls:sys_enter_$c" 2>/dev/null | grep -q Tracepoint &&
		events="$events,syscalls:sys_enter_$c"
done

# iperf_run DIR TAG: one iperf3 run; sets GBPS, GB, and CPU_S/CPU_C (ticks
# of roved / rove during it).
iperf_run() {
	local rflag= s0 c0 s1 c1 bytes
	[ "$1" = down ] && rflag=-R
	s0=$(cpu_ticks "$ROVED_PID") c0=$(cpu_ticks "$LAP_PID")
	nsx "$NS_C" timeout $((PROFILE_TIME + 30)) iperf3 -c "$SRV_TUN4" \
		-t "$PROFILE_TIME" -P "$PROFILE_STREAMS" $rflag -J \
		>"$OUT/iperf-$1-$2.json" 2>"$OUT/iperf-$1-$2.err" ||
		log "iperf3 ($1, $2) failed"
	s1=$(cpu_ticks "$ROVED_PID") c1=$(cpu_ticks "$LAP_PID")
	CPU_S=$((s1 - s0)) CPU_C=$((c1 - c0))
	read -r GBPS bytes < <(iperf_received "$OUT/iperf-$1-$2.json")
	GB=$(awk -v b="$bytes" 'BEGIN { printf "%.4f", b / 1e9 }')
}

for dir in $PROFILE_DIRS; do
	case $dir in
	up|down) ;;
	*) die "unknown direction $dir" ;;
	esac
	# 1. Undisturbed: throughput and CPU per GB.
	iperf_run "$dir" plain
	echo "== $dir ($PROFILE_STREAMS stream(s), ${PROFILE_TIME} s): $GBPS Gbit/s"
	awk -v s="$CPU_S" -v c="$CPU_C" -v hz="$HZ" -v gb="$GB" 'BEGIN {
		printf "CPU s/GB: roved %.2f, rove %.2f, both %.2f\n",
		    s / hz / gb, c / hz / gb, (s + c) / hz / gb }'
	# 2. System calls, counted per thread (both programs are single
	# threaded), per GB of that run.
	perf stat -x, -e "$events" --per-thread -p "$ROVED_PID,$LAP_PID" \
		-o "$OUT/syscalls-$dir.csv" >/dev/null 2>&1 &
	st=$!
	sleep 0.3
	iperf_run "$dir" syscalls
	kill -INT "$st" 2>/dev/null
	wait "$st" 2>/dev/null
	echo "system calls per GB (that run: $GBPS Gbit/s):"
	awk -F, -v gb="$GB" '
		NF > 3 && $2 ~ /^[0-9]+$/ && $2 > 0 {
			prog = $1; sub(/-[0-9]+$/, "", prog)
			ev = $4; sub(/^(raw_)?syscalls:sys_enter_?/, "", ev)
			if (ev == "") ev = "TOTAL"
			n[prog] = n[prog] sprintf(" %s %d", ev, $2 / gb)
		}
		END { for (p in n) printf "  %s:%s\n", p, n[p] }' \
		"$OUT/syscalls-$dir.csv" | sort
	# 3. Samples of both programs.
	cg=()
	case ${PROFILE_CG:-} in
	"") ;;
	fp) cg=(-g) ;;
	*) cg=(--call-graph dwarf,16384) ;;
	esac
	perf record -q -F 999 "${cg[@]}" -p "$ROVED_PID,$LAP_PID" \
		-o "$OUT/perf-$dir.data" >/dev/null 2>&1 &
	rec=$!
	sleep 0.3
	iperf_run "$dir" perf
	kill -INT "$rec" 2>/dev/null
	wait "$rec" 2>/dev/null
	for prog in roved rove; do
		perf report -i "$OUT/perf-$dir.data" --comm "$prog" --no-children \
			--sort dso --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' \
			>"$OUT/dso-$dir-$prog.txt"
		perf report -i "$OUT/perf-$dir.data" --comm "$prog" --no-children \
			--sort sym --percent-limit 0.4 --stdio 2>/dev/null |
			grep -v '^#' | grep -v '^$' >"$OUT/report-$dir-$prog.txt"
		echo "$prog by object: $(head -n 4 "$OUT/dso-$dir-$prog.txt" |
			awk '{ printf "%s %s  ", $2, $1 }')"
		echo "top symbols, $prog (percent of both programs' samples):"
		head -n 30 "$OUT/report-$dir-$prog.txt"
	done
done
log "output in $OUT"
e2e_finish
