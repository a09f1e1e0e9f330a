#!/usr/bin/env bash
# What loss recovery costs on a clean link: rove with LossRecovery = auto
# against LossRecovery = off, in pairs, on one veth between two namespaces.
#
# usage: bench/recovery-cost.sh BUILD_DIR
#   BENCH_PAIRS=N      pairs of runs (default 8)
#   BENCH_TIME=SECONDS length of each iperf3 run (default 5)
#   BENCH_STREAMS=N    iperf3 streams (default 1)
#
# On a clean veth both settings send the same bytes (no datagram is lost,
# so auto sends no repair), and a single run's throughput moves by 10-30%
# with what ran before it on two cores. So each pair runs both settings
# back to back, a fresh tunnel each, in an order that alternates from pair
# to pair (auto first, then off first); the figures are the median of the
# pairs' ratios auto / off, which cancels the drift of the machine, and
# the medians of each setting's own runs. CPU is that of roved and the
# laptop's rove (utime + stime from /proc/PID/stat) over the bytes the
# receiver counted. A pair whose auto run lost a datagram (so repairs were
# due) is reported as such.
. "$(dirname "$0")/../tests/e2e/lib.sh"
# shellcheck source=bench/lib-measure.sh
. "$(dirname "$0")/lib-measure.sh"
# shellcheck source=bench/lib-path.sh
. "$(dirname "$0")/lib-path.sh"
TEST_NAME=bench-recovery-cost
BENCH_PAIRS=${BENCH_PAIRS:-8}
BENCH_TIME=${BENCH_TIME:-5}
BENCH_STREAMS=${BENCH_STREAMS:-1}

e2e_init "$@"
command -v iperf3 >/dev/null || die "iperf3 is not installed (scripts/deps.sh installs it)"
veth_topo_up
bg iperf3-server "$NS_S" iperf3 -s
iperf_listening() { nsx "$NS_S" ss -Hltn 'sport = :5201' | grep -q 5201; }
wait_for 10 "iperf3 listening" iperf_listening || die "iperf3 server does not start"

# one_run SETTING N: a fresh tunnel with LossRecovery = SETTING, one iperf3
# run through it; sets GBPS, CPU (s/GB) and LOST (datagrams the server
# counted lost), or GBPS=failed.
one_run() {
	local json=$WORK/iperf-$1-$2.json c0 c1 bytes
	GBPS=failed CPU=- LOST=-
	rove_recovery_up "$1" || { rove_down; return 1; }
	c0=$(cpu_ticks "$ROVED_PID" "$LAP_PID")
	if nsx "$NS_C" timeout $((BENCH_TIME + 30)) iperf3 -c "$SRV_TUN4" -t "$BENCH_TIME" \
		-P "$BENCH_STREAMS" -J >"$json" 2>"$WORK/iperf-$1-$2.err"; then
		c1=$(cpu_ticks "$ROVED_PID" "$LAP_PID")
		read -r GBPS bytes < <(iperf_received "$json")
		CPU=$(cpu_per_gb $((c1 - c0)) "$bytes")
		LOST=$(status "$NS_S" "$ROVED_SOCK" | jget 'peers[name=laptop].datagrams_lost')
	fi
	rove_down
	log "pair $2, LossRecovery = $1: $GBPS Gbit/s, $CPU CPU s/GB, $LOST datagrams lost"
}

G_AUTO=() G_OFF=() C_AUTO=() C_OFF=() G_RATIO=() C_RATIO=()
for ((i = 1; i <= BENCH_PAIRS; i++)); do
	if ((i % 2)); then order="auto off"; else order="off auto"; fi
	for s in $order; do
		one_run "$s" "$i"
		if [ "$s" = auto ]; then ga=$GBPS ca=$CPU la=$LOST; else go=$GBPS co=$CPU; fi
	done
	G_AUTO+=("$ga") G_OFF+=("$go") C_AUTO+=("$ca") C_OFF+=("$co")
	gr=$(awk -v a="$ga" -v b="$go" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b; else print "-" }')
	cr=$(awk -v a="$ca" -v b="$co" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b; else print "-" }')
	G_RATIO+=("$gr") C_RATIO+=("$cr")
	PAIRS+=("$(printf '%4d  %-9s %7s %7s %7s   %7s %7s %7s   %s' "$i" "$order" \
		"$ga" "$go" "$gr" "$ca" "$co" "$cr" "$la")")
done

echo
echo "loss recovery on a clean veth: $BENCH_PAIRS pairs, $BENCH_STREAMS stream(s), $BENCH_TIME s each, $(nproc) CPUs"
printf '%4s  %-9s %7s %7s %7s   %7s %7s %7s   %s\n' pair order "auto" "off" "ratio" \
	"auto" "off" "ratio" "lost"
printf '%4s  %-9s %23s   %23s   %s\n' "" "" "Gbit/s" "CPU s/GB (both ends)" "(auto)"
printf '%s\n' "${PAIRS[@]}"
printf '%4s  %-9s %7s %7s %7s   %7s %7s %7s\n' median "" \
	"$(median 3 "${G_AUTO[@]}")" "$(median 3 "${G_OFF[@]}")" "$(median 3 "${G_RATIO[@]}")" \
	"$(median 2 "${C_AUTO[@]}")" "$(median 2 "${C_OFF[@]}")" "$(median 3 "${C_RATIO[@]}")"
for v in "${G_AUTO[@]}" "${G_OFF[@]}"; do
	[ "$v" = failed ] && fail "a run failed"
done
e2e_finish
