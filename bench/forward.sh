#!/usr/bin/env bash
# Port-forwarding throughput and CPU cost: rove -L over QUIC and over TLS
# on TCP (Transport = tcp, roved's ListenTCP) against ssh -L, between two
# fresh network namespaces joined by a veth, in one run.
#
# usage: bench/forward.sh BUILD_DIR
#   BENCH_TIME=SECONDS   length of each iperf3 run (default 10)
#   BENCH_RUNS=N         rounds of runs (default 3); medians are reported
#   SSH_CIPHER=NAME      ssh's cipher (default: ssh's own choice)
#
#   $NS_C (client) eth0 198.18.1.2/24 <---- veth ----> eth0 198.18.1.1/24 $NS_S (server)
#   iperf3 -s in $NS_S; iperf3 -c in $NS_C through each forward to
#   127.0.0.1:5201 on the server side:
#   rove -L:  127.0.0.1:15201 in $NS_C -> rove -> QUIC/UDP 4433 -> roved
#             -> 127.0.0.1:5201 (configs/rove.conf, configs/roved.conf);
#             rove TCP: the same over TLS/TCP 443 (the client restarted
#             with Transport = tcp whenever the runs change transport)
#   ssh -L:   127.0.0.1:25201 in $NS_C -> ssh -> TCP 22022 -> a private sshd
#             (own host key and authorized_keys in the work directory)
#             -> 127.0.0.1:5201
#
# Both forwards are set up first, then BENCH_RUNS rounds, in each rove and
# ssh alternating (so a change in the machine's load hits both alike):
# iperf3 TCP with 1 stream, then with 4 streams (-P 4). For each run:
# Gbit/s as iperf3's receiver counts them, and CPU seconds per GB: user +
# system time of the tunnel's processes (rove + roved; ssh + every sshd
# process of the private server) from /proc/PID/stat, before and after the
# run, divided by the gigabytes moved. Printed: every run's figures and
# ratios, the medians and their ratio rove/ssh, and the ping RTT through
# rove's tunnel (198.19.77.1, 10 ms apart) idle and while rove -L carries
# one saturating iperf3 stream (in the first round), over each transport.
#
# Needs root, iproute2, iperf3, iputils-ping, openssh-client and
# openssh-server (installed with apt-get when sshd is missing).
. "$(dirname "$0")/../tests/e2e/fwd-lib.sh"
# shellcheck source=bench/lib-measure.sh
. "$(dirname "$0")/lib-measure.sh"
# shellcheck source=bench/lib-path.sh
. "$(dirname "$0")/lib-path.sh"
# shellcheck source=bench/lib-ssh.sh
. "$(dirname "$0")/lib-ssh.sh"
# shellcheck disable=SC2034 # lib.sh's log() prints it
TEST_NAME=bench-forward
BENCH_TIME=${BENCH_TIME:-10}
BENCH_RUNS=${BENCH_RUNS:-3}
SSH_PORT=22022
ROVE_PORT=15201
SSHL_PORT=25201
T_PORT=5201

sshd_install
fwd_init "$@"
for p in iperf3 ping; do
	command -v $p >/dev/null || die "$p is not installed (scripts/deps.sh installs it)"
done

veth_topo_up

# descendants PID: PID and all its descendants, one per line.
descendants() {
	local stat
	for stat in /proc/[0-9]*/stat; do
		sed 's/.*) //' "$stat" 2>/dev/null | awk -v p="${stat//[^0-9]/}" '{ print p, $2 }'
	done | awk -v root="$1" '
		{ kids[$2] = kids[$2] " " $1 }
		END {
			n = 1; q[1] = root
			for (i = 1; i <= n; i++) {
				print q[i]
				m = split(kids[q[i]], k, " ")
				for (j = 1; j <= m; j++) q[++n] = k[j]
			}
		}'
}

# run_iperf NAME PORT STREAMS PID...: iperf3 through the forward at
# 127.0.0.1:PORT for BENCH_TIME s; sets GBPS and CPU_PER_GB. With
# PING_DURING set, also pings $SRV_TUN4 while data flows (into LOADED_RTT).
run_iperf() {
	local name=$1 port=$2 streams=$3
	shift 3
	local json=$WORK/iperf-$name-$streams.json c0 c1 bytes pid
	GBPS=failed
	CPU_PER_GB=-
	LOADED_RTT_RUN=failed
	c0=$(cpu_ticks "$@")
	nsx "$NS_C" timeout $((BENCH_TIME + 30)) iperf3 -c 127.0.0.1 -p "$port" \
		-t "$BENCH_TIME" -P "$streams" -J >"$json" 2>"$WORK/iperf-$name-$streams.err" &
	pid=$!
	if [ -n "${PING_DURING:-}" ]; then
		# Ping once the transfer is at full speed (20 MB through).
		wait_for 10 "data flowing through rove -L" srv_fwd_rx_over 20000000 ||
			log "no data flows through rove -L"
		run_ping loaded
		LOADED_RTT_RUN=$RTT
	fi
	if ! wait "$pid"; then
		log "iperf3 through $name ($streams streams) failed: $(head -c 300 "$json" "$WORK/iperf-$name-$streams.err")"
		return 1
	fi
	c1=$(cpu_ticks "$@")
	read -r GBPS bytes < <(iperf_received "$json")
	if [ "$bytes" -gt 0 ]; then
		CPU_PER_GB=$(cpu_per_gb $((c1 - c0)) "$bytes")
	fi
	log "$name, $streams stream(s): $GBPS Gbit/s, $CPU_PER_GB CPU s/GB"
}

# run_ping WHAT: average RTT of 300 pings 10 ms apart to $SRV_TUN4, in RTT.
run_ping() {
	local out
	RTT=failed
	out=$(nsx "$NS_C" ping -n -q -c 300 -i 0.01 -W 2 "$SRV_TUN4" 2>&1)
	RTT=$(printf '%s\n' "$out" | sed -n 's|^rtt min/avg/max/mdev = [^/]*/\([^/]*\)/.*|\1|p')
	[ -n "$RTT" ] || RTT=failed
	log "ping through rove's tunnel ($1): avg $RTT ms, $(printf '%s\n' "$out" | grep -o '[0-9.]*% packet loss')"
}

# R[key.field.run]: Gbit/s (g1, g4) and CPU s/GB (c1, c4) of each run.
declare -A R
declare -A IDLE_RTT=([quic]=failed [tcp]=failed)
declare -A LOADED_RTT=([quic]=failed [tcp]=failed)
e2e_transport quic
CUR_T=quic

# rove_transport quic|tcp: the laptop's session over that transport (a
# restart when it changes), its forward listening and its tunnel up.
rove_transport() {
	[ "$CUR_T" = "$1" ] && return 0
	stop_pid "$LAP_PID"
	forget_pid "$LAP_PID"
	conf_set "$WORK/configs/rove.conf" Transport "$1"
	CUR_T=$1
	start_client laptop
	wait_established laptop && wait_for 10 "rove's LocalForward" tcp_listening "$NS_C" "$ROVE_PORT" &&
		wait_for 10 "ping through the tunnel" ping_ok "$NS_C" -c 1 "$SRV_TUN4"
}

bg iperf3-server "$NS_S" iperf3 -s -p "$T_PORT"
wait_listen "$NS_S" "$T_PORT" "iperf3"

# --- rove -L
log "rove -L"
ROVE_UP=0
peer_set laptop AllowForward "127.0.0.1/32:$T_PORT"
client_add "$WORK/configs/rove.conf" "LocalForward = $ROVE_PORT = 127.0.0.1:$T_PORT"
start_roved
start_client laptop
if wait_established laptop && wait_for 10 "rove's LocalForward" tcp_listening "$NS_C" "$ROVE_PORT" &&
	wait_for 10 "ping through the tunnel" ping_ok "$NS_C" -c 1 "$SRV_TUN4"; then
	ROVE_UP=1
	run_ping "idle, QUIC"
	IDLE_RTT[quic]=$RTT
	if rove_transport tcp; then
		run_ping "idle, TLS over TCP"
		IDLE_RTT[tcp]=$RTT
	fi
else
	log "rove's tunnel does not come up"
fi

# --- ssh -L
SSH_CIPHER_USED=-
SSH_UP=0
ssh_up() {
	FWD_CLEANUP+=(sshd_rundir_cleanup)
	sshd_start "$NS_S" "$SRV_OUTER" "$SSH_PORT" "$WORK/ssh" || return 1
	wait_for 10 "sshd" tcp_listening "$NS_S" "$SSH_PORT" || return 1
	bg ssh "$NS_C" ssh -v "${SSH_OPTS[@]}" \
		${SSH_CIPHER:+-c "$SSH_CIPHER"} \
		-L "127.0.0.1:$SSHL_PORT:127.0.0.1:$T_PORT" "root@$SRV_OUTER"
	SSH_PID=$BG_PID
	wait_for 10 "ssh's forward" tcp_listening "$NS_C" "$SSHL_PORT" || return 1
	SSH_CIPHER_USED=$(sed -n 's/.*kex: client->server cipher: \([^ ]*\) .*/\1/p' "$WORK/ssh.log" | head -n1)
}
log "ssh -L"
if ssh_up; then
	SSH_UP=1
	# The session's sshd processes exist now; measure all of them.
	mapfile -t SSHD_PIDS < <(descendants "$SSHD_PID")
	log "ssh cipher: $SSH_CIPHER_USED; sshd processes: ${SSHD_PIDS[*]}"
else
	log "ssh -L could not be set up: $(tail -n 5 "$WORK/sshd.log" "$WORK/ssh.log" 2>/dev/null)"
fi

# Both forwards stay up (idle, they cost nothing) and their runs alternate,
# so that a change in the machine's load between runs hits both alike.
for run in $(seq "$BENCH_RUNS"); do
	for streams in 1 4; do
		for key in rove rovetcp ssh; do
			R[$key.g$streams.$run]=failed
			R[$key.c$streams.$run]=failed
		done
		for key in rove rovetcp; do
			[ "$ROVE_UP" = 1 ] || continue
			t=quic
			[ "$key" = rovetcp ] && t=tcp
			rove_transport "$t" || { log "rove over $t does not come up"; continue; }
			# The loaded ping: during the first 1-stream run only.
			if [ "$run" = 1 ] && [ "$streams" = 1 ]; then
				PING_DURING=1 run_iperf "$key" "$ROVE_PORT" 1 "$LAP_PID" "$ROVED_PID" &&
					R[$key.g1.$run]=$GBPS R[$key.c1.$run]=$CPU_PER_GB
				LOADED_RTT[$t]=$LOADED_RTT_RUN
			else
				run_iperf "$key" "$ROVE_PORT" "$streams" "$LAP_PID" "$ROVED_PID" &&
					R[$key.g$streams.$run]=$GBPS R[$key.c$streams.$run]=$CPU_PER_GB
			fi
		done
		if [ "$SSH_UP" = 1 ]; then
			run_iperf ssh "$SSHL_PORT" "$streams" "$SSH_PID" "${SSHD_PIDS[@]}" &&
				R[ssh.g$streams.$run]=$GBPS R[ssh.c$streams.$run]=$CPU_PER_GB
		fi
	done
done
for p in ${SSH_PID:-} ${SSHD_PID:-} "$LAP_PID" "$ROVED_PID"; do
	stop_pid "$p"
	forget_pid "$p"
done

ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'
}

# col KEY FIELD: the runs' values of one column, one a line.
col() {
	local run
	for run in $(seq "$BENCH_RUNS"); do
		printf '%s\n' "${R[$1.$2.$run]}"
	done
}

row() {
	printf '%-24s %12s %10s %12s %10s\n' "$@"
}

echo
printf 'Port forwarding, %s round(s) of %s s iperf3 runs, rove and ssh alternating (%s)\n' \
	"$BENCH_RUNS" "$BENCH_TIME" "$(uname -r)"
row path '1 st Gbit/s' 'CPU s/GB' '4 st Gbit/s' 'CPU s/GB'
if [ "$BENCH_RUNS" -gt 1 ]; then
	for run in $(seq "$BENCH_RUNS"); do
		row "rove -L, run $run" "${R[rove.g1.$run]}" "${R[rove.c1.$run]}" \
			"${R[rove.g4.$run]}" "${R[rove.c4.$run]}"
		row "rove -L TCP, run $run" "${R[rovetcp.g1.$run]}" "${R[rovetcp.c1.$run]}" \
			"${R[rovetcp.g4.$run]}" "${R[rovetcp.c4.$run]}"
		row "ssh -L, run $run" "${R[ssh.g1.$run]}" "${R[ssh.c1.$run]}" \
			"${R[ssh.g4.$run]}" "${R[ssh.c4.$run]}"
		row "ratio, run $run" \
			"$(ratio "${R[rove.g1.$run]}" "${R[ssh.g1.$run]}")" \
			"$(ratio "${R[rove.c1.$run]}" "${R[ssh.c1.$run]}")" \
			"$(ratio "${R[rove.g4.$run]}" "${R[ssh.g4.$run]}")" \
			"$(ratio "${R[rove.c4.$run]}" "${R[ssh.c4.$run]}")"
	done
fi
declare -A M
for key in rove rovetcp ssh; do
	for f in g1 c1 g4 c4; do
		mapfile -t vals < <(col "$key" "$f")
		M[$key.$f]=$(median 3 "${vals[@]}")
	done
done
label=""
[ "$BENCH_RUNS" -gt 1 ] && label=" (median)"
row "rove -L$label" "${M[rove.g1]}" "${M[rove.c1]}" "${M[rove.g4]}" "${M[rove.c4]}"
row "rove -L TCP$label" "${M[rovetcp.g1]}" "${M[rovetcp.c1]}" "${M[rovetcp.g4]}" "${M[rovetcp.c4]}"
row "ssh -L$label" "${M[ssh.g1]}" "${M[ssh.c1]}" "${M[ssh.g4]}" "${M[ssh.c4]}"
row "ratio rove/ssh" \
	"$(ratio "${M[rove.g1]}" "${M[ssh.g1]}")" "$(ratio "${M[rove.c1]}" "${M[ssh.c1]}")" \
	"$(ratio "${M[rove.g4]}" "${M[ssh.g4]}")" "$(ratio "${M[rove.c4]}" "${M[ssh.c4]}")"
row "ratio rove TCP/ssh" \
	"$(ratio "${M[rovetcp.g1]}" "${M[ssh.g1]}")" "$(ratio "${M[rovetcp.c1]}" "${M[ssh.c1]}")" \
	"$(ratio "${M[rovetcp.g4]}" "${M[ssh.g4]}")" "$(ratio "${M[rovetcp.c4]}" "${M[ssh.c4]}")"
printf 'ssh cipher: %s\n' "$SSH_CIPHER_USED"
for t in quic tcp; do
	printf 'ping RTT through rove'"'"'s tunnel over %s: idle %s ms, while rove -L saturates it %s ms\n' \
		"$t" "${IDLE_RTT[$t]}" "${LOADED_RTT[$t]}"
done
[ "${M[rove.g1]}" != failed ] && [ "${M[ssh.g1]}" != failed ]
