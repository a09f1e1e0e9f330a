#!/usr/bin/env bash
# One roved process against two (Workers = 2), in one run: rove-load
# connects WORKERS_N sessions (default 2,000) and then WORKERS_ACTIVE (50)
# of them keep 8 ICMP echo requests of 1200 bytes each in flight through
# the tunnel to roved's address for 5 s; then WORKERS_ACTIVE new sessions
# each keep a forward to a TCP sink beside roved full for 5 s. Prints, for
# each setting, the handshakes per second while connecting, the echo
# throughput (each way), the forwards' aggregate throughput, and the CPU
# seconds all roved processes used for each phase.
#
# usage: bench/workers.sh BUILD_DIR
# rove-load (the client side of every handshake and every echo) shares the
# machine's CPUs with roved: on 2 CPUs it is one of the three busy
# processes, which bounds what a second worker can add. Every phase is
# bounded (rove-load -c and -T, wait_for); about a minute.
. "$(dirname "$0")/../tests/e2e/load-lib.sh"
TEST_NAME=bench-workers
N=${WORKERS_N:-2000}
ACTIVE=${WORKERS_ACTIVE:-50}
load_init "$1"
load_topo_up
log "generating $N keys and peers"
load_gen "$N"
nsx "$NS_SRV" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
cp "$LOAD_CONF" "$WORK/one.conf"

# roved_cpu: CPU seconds of every process in roved's namespace.
roved_cpu() {
	local hz pid total=0
	hz=$(getconf CLK_TCK)
	for pid in $(ip netns pids "$NS_SRV"); do
		total=$((total + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$pid/stat")))
	done
	awk -v t="$total" -v hz="$hz" 'BEGIN { printf "%.2f", t / hz }'
}

load_sink_start
declare -A HS MBIT FWD CPU_C CPU_D
for w in 1 2; do
	sed "s/^\\[Server\\]$/[Server]\\nWorkers = $w/" "$WORK/one.conf" >"$LOAD_CONF"
	rm -rf "$WORK/configs/state/roved-load"
	load_start_roved
	c0=$(roved_cpu)
	load_run "load-$w" "$N" -C 128 -c 120 -i 1 -m "$ACTIVE" -t "$LOAD_TUN" -w 8 \
		-S 1200 -T 5 -H 30
	load_wait_line "load-$w" 150 "RESULT connected" || die "rove-load did not connect ($w)"
	c1=$(roved_cpu)
	load_wait_line "load-$w" 60 "holding the sessions" || die "rove-load did not finish ($w)"
	c2=$(roved_cpu)
	HS[$w]=$(load_result "load-$w" handshakes_per_s)
	MBIT[$w]=$(load_result "load-$w" echo_mbit)
	CPU_C[$w]=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')
	CPU_D[$w]=$(awk -v a="$c1" -v b="$c2" 'BEGIN { printf "%.2f", b - a }')
	stop_pid "$LOAD_PID"
	forget_pid "$LOAD_PID"
	load_run "fwd-$w" "$ACTIVE" -C "$ACTIVE" -c 30 -i 1 -m "$ACTIVE" \
		-F "$LOAD_SINK:$LOAD_SINK_PORT" -T 5 -H 1
	load_wait_line "fwd-$w" 60 "RESULT fwd_bytes" || die "rove-load's forwards did not finish ($w)"
	FWD[$w]=$(load_result "fwd-$w" fwd_mbit)
	stop_pid "$LOAD_PID"
	forget_pid "$LOAD_PID"
	log "workers $w: ${HS[$w]} handshakes/s, ${MBIT[$w]} Mbit/s echoes, ${FWD[$w]} Mbit/s forwards"
	load_stop_roved
	mv "$WORK/roved.log" "$WORK/roved-$w.log"
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }'; }
echo
echo "Workers: roved as 1 and as 2 processes, rove-load with $N sessions," \
	"$ACTIVE active ($(basename "$BUILD"); $(nproc) CPUs shared by all)"
printf '  %-10s %14s %18s %18s %24s\n' "" "handshakes/s" "echo Mbit/s each" \
	"forwards Mbit/s" "roved CPU s (conn/echo)"
for w in 1 2; do
	printf '  %-10s %14s %18s %18s %24s\n' "workers $w" "${HS[$w]}" "${MBIT[$w]}" \
		"${FWD[$w]}" "${CPU_C[$w]} / ${CPU_D[$w]}"
done
printf '  %-10s %14s %18s %18s\n' "2 / 1" "$(ratio "${HS[1]}" "${HS[2]}")" \
	"$(ratio "${MBIT[1]}" "${MBIT[2]}")" "$(ratio "${FWD[1]}" "${FWD[2]}")"
e2e_finish
