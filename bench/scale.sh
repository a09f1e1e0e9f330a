#!/usr/bin/env bash
# Scale benchmark: one roved with SCALE_CONF_N configured peers (default
# 10,000) and tests/load/rove-load connecting SCALE_N of them (default
# 2,000) from one process in a second namespace. Prints:
#   config check    roved -n on the SCALE_CONF_N-peer config (best of 3)
#   start           roved started until its control socket exists, and
#                   its RSS then
#   status          rove status (text and --json) with none connected, all
#                   SCALE_N connected and after the restart: milliseconds
#                   and bytes; and --summary and --peer NAME; one scrape
#                   of /metrics (MetricsListen) with all connected
#   connect         SCALE_N sessions, at most SCALE_CONC (128) handshakes
#                   at once: time until all are up, handshakes/s, the
#                   distribution of the time each took, roved's CPU per
#                   handshake
#   idle            roved's RSS per idle connected peer (RSS with all up
#                   minus RSS before, over SCALE_N) and its CPU while idle
#   datagrams       SCALE_ACTIVE (50) sessions each keeping 8 ICMP echo
#                   requests of 1200 bytes in flight through the tunnel to
#                   roved's TUN address for 5 s: Mbit/s each way, lost
#   reload          SIGHUP with all SCALE_N connected, the file unchanged
#                   and then with a peer added: the milliseconds worker 0
#                   logs for each, and how many are established after
#   restart         roved stopped (SIGTERM: it closes every connection)
#                   and started again with the same StateDir: time from
#                   the first lost session until all are back, 0-RTT
#                   accepted of attempted, the distribution of each
#                   session's time without one, connection attempts,
#                   roved's CPU for it, and how long its stop took
#
# SCALE_PERF=FILE records a system-wide perf profile (with call graphs)
# from just before the restart until all sessions are back;
# SCALE_PERF_ARGS replaces its options (default "-a -g"), for example
# "-a -F 499 --call-graph dwarf" for user-space call graphs.
# SCALE_KEX (hybrid, the default, or classic) sets rove-load's
# KeyExchange: hybrid's ClientHello spans two Initials, classic's one.
# SCALE_WORKERS (default 1) sets roved's Workers; its RSS and CPU are then
# worker 0's alone (rove-load reads one PID), everything else is the
# whole server's.
#
# usage: bench/scale.sh BUILD_DIR
# Both programs share the machine's CPUs: rove-load does the client side
# of every handshake. Every phase is bounded (rove-load -c/-r, wait_for);
# the default run takes about a minute.
. "$(dirname "$0")/../tests/e2e/load-lib.sh"
TEST_NAME=bench-scale
N=${SCALE_N:-2000}
CONF_N=${SCALE_CONF_N:-10000}
ACTIVE=${SCALE_ACTIVE:-50}
CONC=${SCALE_CONC:-128}
WORKERS=${SCALE_WORKERS:-1}
KEX=${SCALE_KEX:-hybrid}
[ "$CONF_N" -ge "$N" ] || CONF_N=$N
[ "$ACTIVE" -le "$N" ] || ACTIVE=$N
load_init "$1"
load_topo_up
log "generating $CONF_N keys and peers"
load_gen "$CONF_N"

# roved -n: parse and check the whole config, best of three.
check_ms=
for i in 1 2 3; do
	t0=$(date +%s%N)
	"$BUILD/roved" -n -c "$LOAD_CONF" >/dev/null 2>&1 || die "roved -n refused the config"
	ms=$(ms_since "$t0")
	{ [ -z "$check_ms" ] || [ "$ms" -lt "$check_ms" ]; } && check_ms=$ms
done

rss_kb() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status"; }
cpu_s() {
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' \
		"/proc/$1/stat"
}
# Prometheus metrics too (MetricsListen), scraped as a collector would.
sed -i "s/^\\[Server\\]\$/[Server]\\nMetricsListen = 127.0.0.1:9105\\nWorkers = $WORKERS/" "$LOAD_CONF"
# metrics_time: "MS KB" for one scrape of /metrics.
metrics_time() {
	local t0 bytes
	t0=$(date +%s%N)
	bytes=$(nsx "$NS_SRV" curl -sf http://127.0.0.1:9105/metrics | wc -c)
	echo "$(ms_since "$t0") ms, $((bytes / 1024)) KB"
}
# status_time [--json]: "MS KB" for one rove status of roved.
status_time() {
	local t0 bytes
	t0=$(date +%s%N)
	bytes=$(nsx "$NS_SRV" "$BUILD/rove" status -s "$ROVED_SOCK" "$@" | wc -c)
	echo "$(ms_since "$t0") ms, $((bytes / 1024)) KB"
}

# The status of a roved none of whose peers is connected; then a fresh
# one for the sessions, so that what these answers left in its heap does
# not make the sessions look cheaper.
load_start_roved
st_none_text=$(status_time)
st_none_json=$(status_time --json)
load_stop_roved
mv "$WORK/roved.log" "$WORK/roved-0.log"
load_start_roved
start_ms=$ROVED_START_MS
start_rss=$(rss_kb "$ROVED_PID")

log "connecting $N sessions"
load_run load "$N" -C "$CONC" -c 120 -i 3 -m "$ACTIVE" -t "$LOAD_TUN" -w 8 -S 1200 \
	-T 5 -r 90 -H 60 -K "$KEX"
load_wait_line load 150 "waiting for a server restart" ||
	die "rove-load did not reach its restart phase"
st_up_text=$(status_time)
st_up_json=$(status_time --json)
st_up_summary=$(status_time --json --summary)
st_up_peer=$(status_time --json --peer load-00001)
metrics_up=$(metrics_time)
states_up=$(nsx "$NS_SRV" "$BUILD/rove" status -s "$ROVED_SOCK" --json --summary |
	jget peer_states)

# Reload (SIGHUP) with every session up: the file unchanged, then with a
# peer added. Worker 0 logs how long it took; the sessions must not
# notice (the same number established after).
# reload_ms: SIGHUP, then worker 0's "reload done in MS ms".
reload_ms() {
	local before i
	before=$(grep -c 'roved: reload done in' "$WORK/roved.log")
	kill -HUP "$ROVED_PID"
	for ((i = 0; i < 1000; i++)); do
		[ "$(grep -c 'roved: reload done in' "$WORK/roved.log")" -gt "$before" ] && break
		sleep 0.01
	done
	grep 'roved: reload done in' "$WORK/roved.log" | sed -n "$((before + 1))s/.* in \([0-9.]*\) ms/\1/p"
}
reload_same_ms=$(reload_ms)
"$BUILD/tests/rove-load" gen -n 1 -k "$WORK/extra.keys" -p "$WORK/extra-peer.conf" >/dev/null ||
	die "rove-load gen failed"
sed 's/^Name = load-/Name = extra-/' "$WORK/extra-peer.conf" >>"$LOAD_CONF"
reload_add_ms=$(reload_ms)
[ -n "$reload_same_ms" ] && [ -n "$reload_add_ms" ] || fail "roved did not log its reloads"
established() {
	nsx "$NS_SRV" "$BUILD/rove" status -s "$ROVED_SOCK" --json --summary |
		"$PY" -c 'import json, sys; print(json.load(sys.stdin)["peer_states"]["established"])'
}
est_reload=$(established)

log "restarting roved"
perf_pid=
if [ -n "${SCALE_PERF:-}" ]; then
	# shellcheck disable=SC2086 # SCALE_PERF_ARGS is a list of options
	perf record -q ${SCALE_PERF_ARGS:--a -g} -o "$SCALE_PERF" -- sleep 30 >/dev/null 2>&1 &
	perf_pid=$!
	sleep 0.5
fi
# udp_drops NS: datagrams the namespace's UDP sockets had no room for.
udp_drops() { nsx "$1" nstat -az UdpRcvbufErrors | awk '$1 == "UdpRcvbufErrors" { print $2 }'; }
drops_srv0=$(udp_drops "$NS_SRV")
drops_load0=$(udp_drops "$NS_LOAD")
t0=$(date +%s%N)
load_stop_roved
stop_ms=$(ms_since "$t0")
mv "$WORK/roved.log" "$WORK/roved-1.log"
load_start_roved
restart_start_ms=$ROVED_START_MS
# Polled every half second, not wait_for's tenth: rove-load times the
# storm itself, and the poll's processes would take CPU from it.
for ((i = 0; i < 200; i++)); do
	grep -q "holding the sessions" "$WORK/load.log" && break
	sleep 0.5
done
grep -q "holding the sessions" "$WORK/load.log" ||
	fail "rove-load did not see every session back"
[ -z "$perf_pid" ] || { kill -INT "$perf_pid"; wait "$perf_pid"; }
storm_cpu=$(cpu_s "$ROVED_PID")
drops_srv=$(($(udp_drops "$NS_SRV") - drops_srv0))
drops_load=$(($(udp_drops "$NS_LOAD") - drops_load0))
# Every worker's (worker 0's children), for the whole server's CPU.
storm_cpu_all=$storm_cpu
for w in $(pgrep -P "$ROVED_PID" -x roved); do
	storm_cpu_all=$(awk -v a="$storm_cpu_all" -v b="$(cpu_s "$w")" 'BEGIN { printf "%.2f", a + b }')
done
storm_rss=$(rss_kb "$ROVED_PID")
st_back_text=$(status_time)
st_back_json=$(status_time --json)
summary_back=$(nsx "$NS_SRV" "$BUILD/rove" status -s "$ROVED_SOCK" --json --summary)
states_back=$(printf '%s\n' "$summary_back" | jget peer_states)
admission_back=$(printf '%s\n' "$summary_back" | jget admission)
stop_pid "$LOAD_PID"
forget_pid "$LOAD_PID"

r() { load_result load "$1"; }
echo
echo "Scale: roved with $CONF_N configured peers ($WORKERS worker(s)), rove-load with $N sessions, KeyExchange $KEX" \
	"($(basename "$BUILD"); $(nproc) CPUs shared by both)"
printf '  %-34s %s\n' \
	"keys and config ($CONF_N peers)" "${LOAD_GEN_S} s to generate" \
	"config check (roved -n)" "$check_ms ms" \
	"start (to control socket)" "$start_ms ms, RSS $((start_rss / 1024)) MiB" \
	"status, none connected" "text $st_none_text; json $st_none_json" \
	"connect $N" "$(r connect_s) s, $(r handshakes_per_s) handshakes/s ($CONC at once)" \
	"roved per handshake" "$(r cpu_per_handshake_ms) ms of CPU" \
	"RSS per idle connected peer" "$(r rss_per_session_kb) KiB ($(r rss_per_session_half_kb) KiB for the second half)" \
	"roved idle, $N connected" "$(r idle_cpu_pct)% of a core" \
	"status, $N connected" "text $st_up_text; json $st_up_json" \
	"status --summary / --peer" "$st_up_summary / $st_up_peer" \
	"metrics scrape, $N connected" "$metrics_up" \
	"peer states" "$states_up" \
	"datagrams, $ACTIVE active" "$(r echo_mbit) Mbit/s each way, $(r echo_answered) answered, $(r echo_lost) lost" \
	"reload (SIGHUP), $N connected" "$reload_same_ms ms unchanged, $reload_add_ms ms with a peer added; $est_reload established after" \
	"restart: roved stop, start" "$stop_ms ms to exit (SIGTERM), $restart_start_ms ms to start" \
	"restart: all back" "$(r back) of $(r lost) in $(r back_s) s after the first loss" \
	"restart: 0-RTT" "$(r zero_rtt_accepted) accepted of $(r zero_rtt_attempted) attempted, $(r zero_rtt_rejected) rejected" \
	"restart: connection attempts" "$(r attempts), at most $(r max_attempts) for one session" \
	"restart: UDP receive buffers full" "roved's side $drops_srv datagrams, rove-load's $drops_load" \
	"restart: roved CPU, RSS" "$storm_cpu s (all workers $storm_cpu_all s) from its start until all were back; RSS $((storm_rss / 1024)) MiB" \
	"status after the restart" "text $st_back_text; json $st_back_json" \
	"peer states after" "$states_back" \
	"admission after the restart" "$admission_back"
echo "  rove-load:"
grep -v '^RESULT\|^waiting\|^holding' "$WORK/load.log" | sed 's/^/    /'
e2e_finish
