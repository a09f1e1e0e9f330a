# shellcheck shell=bash
# The figures the throughput benchmarks report: CPU cost per gigabyte, as
# bench/run.sh, forward.sh and profile.sh give it (the tunnel's processes'
# CPU time during an iperf3 run over the bytes its receiver counted), and
# the median of repeated runs (bench/forward.sh, wan.sh). Sourced after
# tests/e2e/lib.sh, whose PY it uses.
#
#   HZ                 clock ticks per second of /proc/PID/stat
#   cpu_ticks PID...   utime + stime of the processes, in clock ticks
#   iperf_received JSON
#                      "GBIT_PER_S BYTES" as the receiver counted them, from
#                      iperf3 -J's output
#   cpu_per_gb TICKS BYTES
#                      CPU seconds per GB, to two places
#   median PLACES VALUE...
#                      the median of the numbers among the values (a
#                      failed run's word left out), or "failed" if there
#                      are none; the mean of the middle two is given to
#                      PLACES decimals

HZ=$(getconf CLK_TCK)

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

iperf_received() {
	"$PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))["end"]["sum_received"]
print("%.3f %d" % (r["bits_per_second"] / 1e9, r["bytes"]))' "$1"
}

cpu_per_gb() {
	awk -v t="$1" -v hz="$HZ" -v b="$2" 'BEGIN { printf "%.2f", t / hz / (b / 1e9) }'
}

median() {
	printf '%s\n' "${@:2}" | grep -E '^[0-9]+(\.[0-9]+)?$' | sort -g |
		awk -v fmt="%.$1f\n" '
		{ v[NR] = $1 }
		END {
			if (NR == 0) { print "failed"; exit }
			if (NR % 2) print v[(NR + 1) / 2]
			else printf fmt, (v[NR / 2] + v[NR / 2 + 1]) / 2
		}'
}
