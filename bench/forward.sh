#!/usr/bin/env bash
# Port-forwarding throughput and CPU cost: rove -L against ssh -L, between
# two fresh network namespaces joined by a veth, in one run.
#
# usage: bench/forward.sh BUILD_DIR
#   BENCH_TIME=SECONDS   length of each iperf3 run (default 10)
#   SSH_CIPHER=NAME      ssh's cipher (default: ssh's own choice)
#
#   $NS_C (client) eth0 198.18.1.2/24 <---- veth ----> eth0 198.18.1.1/24 $NS_S (server)
#   iperf3 -s in $NS_S; iperf3 -c in $NS_C through each forward to
#   127.0.0.1:5201 on the server side:
#   rove -L:  127.0.0.1:15201 in $NS_C -> rove -> QUIC/UDP 4433 -> roved
#             -> 127.0.0.1:5201 (configs/rove.conf, configs/roved.conf)
#   ssh -L:   127.0.0.1:25201 in $NS_C -> ssh -> TCP 22022 -> a private sshd
#             (own host key and authorized_keys in the work directory)
#             -> 127.0.0.1:5201
#
# For each: iperf3 TCP with 1 stream and with 4 streams (-P 4), Gbit/s as
# iperf3's receiver counts them, and CPU seconds per GB: user + system time
# of the tunnel's processes (rove + roved; ssh + every sshd process of the
# private server) from /proc/PID/stat, before and after the run, divided by
# the gigabytes moved. Then the ratio rove/ssh, and the ping RTT through
# rove's tunnel (198.19.77.1, 10 ms apart) idle and while rove -L carries one
# saturating iperf3 stream.
#
# Needs root, iproute2, iperf3, iputils-ping, openssh-client and
# openssh-server (installed with apt-get when sshd is missing).
. "$(dirname "$0")/../tests/e2e/fwd-lib.sh"
# shellcheck disable=SC2034 # lib.sh's log() prints it
TEST_NAME=bench-forward
BENCH_TIME=${BENCH_TIME:-10}
SSH_PORT=22022
ROVE_PORT=15201
SSHL_PORT=25201
T_PORT=5201

if [ ! -x /usr/sbin/sshd ] && [ "$(id -u)" -eq 0 ]; then
	log "installing openssh-server"
	apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends openssh-server openssh-client >/dev/null ||
		echo "bench: cannot install openssh-server; the ssh row will be missing" >&2
fi
fwd_init "$@"
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
wait_for 10 "the veth link" veth_pings || die "the veth link does not come up"

HZ=$(getconf CLK_TCK)

# cpu_ticks PID...: utime + stime of the processes, in clock ticks.
cpu_ticks() {
	local pid sum=0 f
	for pid in "$@"; do
		# Fields 14 and 15, counted after the command name's closing
		# parenthesis (the name may hold spaces).
		read -r -a f < <(sed 's/.*) //' "/proc/$pid/stat") || return 1
		sum=$((sum + f[11] + f[12]))
	done
	echo "$sum"
}

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
	c0=$(cpu_ticks "$@")
	nsx "$NS_C" timeout $((BENCH_TIME + 30)) iperf3 -c 127.0.0.1 -p "$port" \
		-t "$BENCH_TIME" -P "$streams" -J >"$json" 2>"$WORK/iperf-$name-$streams.err" &
	pid=$!
	if [ -n "${PING_DURING:-}" ]; then
		# Ping once the transfer is at full speed (20 MB through).
		wait_for 10 "data flowing through rove -L" srv_fwd_rx_over 20000000 ||
			log "no data flows through rove -L"
		run_ping loaded
		LOADED_RTT=$RTT
	fi
	if ! wait "$pid"; then
		log "iperf3 through $name ($streams streams) failed: $(head -c 300 "$json" "$WORK/iperf-$name-$streams.err")"
		return 1
	fi
	c1=$(cpu_ticks "$@")
	read -r GBPS bytes < <("$PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))["end"]["sum_received"]
print("%.3f %d" % (r["bits_per_second"] / 1e9, r["bytes"]))' "$json")
	if [ "$bytes" -gt 0 ]; then
		CPU_PER_GB=$(awk -v t=$((c1 - c0)) -v hz="$HZ" -v b="$bytes" \
			'BEGIN { printf "%.2f", t / hz / (b / 1e9) }')
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

declare -A R
for key in rove ssh; do
	for f in g1 c1 g4 c4; do R[$key.$f]=failed; done
done
IDLE_RTT=failed
LOADED_RTT=failed

bg iperf3-server "$NS_S" iperf3 -s -p "$T_PORT"
wait_listen "$NS_S" "$T_PORT" "iperf3"

# --- rove -L
log "rove -L"
peer_set laptop AllowForward "127.0.0.1/32:$T_PORT"
client_add "$WORK/configs/rove.conf" "LocalForward = $ROVE_PORT = 127.0.0.1:$T_PORT"
start_roved
start_client laptop
if wait_established laptop && wait_for 10 "rove's LocalForward" tcp_listening "$NS_C" "$ROVE_PORT" &&
	wait_for 10 "ping through the tunnel" ping_ok "$NS_C" -c 1 "$SRV_TUN4"; then
	run_ping idle
	IDLE_RTT=$RTT
	PING_DURING=1 run_iperf rove "$ROVE_PORT" 1 "$LAP_PID" "$ROVED_PID" &&
		R[rove.g1]=$GBPS R[rove.c1]=$CPU_PER_GB
	run_iperf rove "$ROVE_PORT" 4 "$LAP_PID" "$ROVED_PID" &&
		R[rove.g4]=$GBPS R[rove.c4]=$CPU_PER_GB
else
	log "rove's tunnel does not come up"
fi
stop_pid "$LAP_PID"; forget_pid "$LAP_PID"
stop_pid "$ROVED_PID"; forget_pid "$ROVED_PID"

# --- ssh -L
SSH_CIPHER_USED=-
ssh_up() {
	local d=$WORK/ssh
	[ -x /usr/sbin/sshd ] || { log "sshd is not installed"; return 1; }
	mkdir -p "$d" && chmod 700 "$d"
	ssh-keygen -q -t ed25519 -N '' -f "$d/host_key" || return 1
	ssh-keygen -q -t ed25519 -N '' -f "$d/id" || return 1
	cp "$d/id.pub" "$d/authorized_keys"
	# sshd insists on its privilege separation directory.
	if [ ! -d /run/sshd ]; then
		mkdir -m 755 /run/sshd || return 1
		FWD_CLEANUP+=("rmdir /run/sshd 2>/dev/null")
	fi
	cat >"$d/sshd_config" <<EOF
Port $SSH_PORT
ListenAddress $SRV_OUTER
HostKey $d/host_key
AuthorizedKeysFile $d/authorized_keys
PidFile none
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowTcpForwarding yes
X11Forwarding no
EOF
	bg sshd "$NS_S" /usr/sbin/sshd -D -e -f "$d/sshd_config"
	SSHD_PID=$BG_PID
	wait_for 10 "sshd" tcp_listening "$NS_S" "$SSH_PORT" || return 1
	bg ssh "$NS_C" ssh -v -N -F /dev/null -i "$d/id" -p "$SSH_PORT" \
		-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
		-o BatchMode=yes -o ExitOnForwardFailure=yes \
		${SSH_CIPHER:+-c "$SSH_CIPHER"} \
		-L "127.0.0.1:$SSHL_PORT:127.0.0.1:$T_PORT" "root@$SRV_OUTER"
	SSH_PID=$BG_PID
	wait_for 10 "ssh's forward" tcp_listening "$NS_C" "$SSHL_PORT" || return 1
	SSH_CIPHER_USED=$(sed -n 's/.*kex: client->server cipher: \([^ ]*\) .*/\1/p' "$WORK/ssh.log" | head -n1)
}
log "ssh -L"
if ssh_up; then
	# The session's sshd processes exist now; measure all of them.
	mapfile -t SSHD_PIDS < <(descendants "$SSHD_PID")
	log "ssh cipher: $SSH_CIPHER_USED; sshd processes: ${SSHD_PIDS[*]}"
	run_iperf ssh "$SSHL_PORT" 1 "$SSH_PID" "${SSHD_PIDS[@]}" &&
		R[ssh.g1]=$GBPS R[ssh.c1]=$CPU_PER_GB
	run_iperf ssh "$SSHL_PORT" 4 "$SSH_PID" "${SSHD_PIDS[@]}" &&
		R[ssh.g4]=$GBPS R[ssh.c4]=$CPU_PER_GB
else
	log "ssh -L could not be set up: $(tail -n 5 "$WORK/sshd.log" "$WORK/ssh.log" 2>/dev/null)"
fi
for p in ${SSH_PID:-} ${SSHD_PID:-}; do
	stop_pid "$p"
	forget_pid "$p"
done

ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'
}

echo
printf 'Port forwarding, %s s per iperf3 run (%s)\n' "$BENCH_TIME" "$(uname -r)"
printf '%-22s %12s %10s %12s %10s\n' path '1 st Gbit/s' 'CPU s/GB' '4 st Gbit/s' 'CPU s/GB'
printf '%-22s %12s %10s %12s %10s\n' "rove -L" "${R[rove.g1]}" "${R[rove.c1]}" "${R[rove.g4]}" "${R[rove.c4]}"
printf '%-22s %12s %10s %12s %10s\n' "ssh -L" "${R[ssh.g1]}" "${R[ssh.c1]}" "${R[ssh.g4]}" "${R[ssh.c4]}"
printf '%-22s %12s %10s %12s %10s\n' "ratio rove/ssh" \
	"$(ratio "${R[rove.g1]}" "${R[ssh.g1]}")" "$(ratio "${R[rove.c1]}" "${R[ssh.c1]}")" \
	"$(ratio "${R[rove.g4]}" "${R[ssh.g4]}")" "$(ratio "${R[rove.c4]}" "${R[ssh.c4]}")"
printf 'ssh cipher: %s\n' "$SSH_CIPHER_USED"
printf 'ping RTT through rove'"'"'s tunnel: idle %s ms, while rove -L saturates it %s ms\n' \
	"$IDLE_RTT" "$LOADED_RTT"
[ "${R[rove.g1]}" != failed ] && [ "${R[ssh.g1]}" != failed ]
