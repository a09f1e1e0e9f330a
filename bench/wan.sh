#!/usr/bin/env bash
# Port forwards over a wide-area path with a bottleneck: rove -L over QUIC
# and over TLS/TCP against ssh -L, with the IP tunnels (rove's and trixie's
# wireguard-go) for reference, at several round trips and loss rates, with
# the end hosts' TCP on BBR or on Cubic.
#
# usage: bench/wan.sh BUILD_DIR
#   WAN_RATE=MBIT        the bottleneck, each direction (default 200)
#   WAN_RTTS="10 50 150" round trips of the clean-path runs, in ms
#   WAN_LOSSES="0 0.1 1 2"  random loss of the lossy runs, percent per
#                        direction (50 ms round trip)
#   WAN_LOSSY_CCS="cubic bbr"  the end hosts' TCP in the lossy runs
#   WAN_ROWS="quic tcp ssh tun wg"  what to run: rove -L over QUIC, rove -L
#                        over TLS/TCP, ssh -L, rove's IP tunnel, wireguard-go
#   WAN_PARTS="clean lossy multi"   which parts of the matrix below
#   BENCH_TIME=SECONDS   length of each iperf3 run (default 8)
#   BENCH_RUNS=N         runs of each cell; the table shows medians (default 1)
#
#   +-- $NS_C (client) --+      +------ $NS_R (router) ------+      +-- $NS_S (server) --+
#   | eth0 198.18.40.2 --|------|- rc 198.18.40.1  (tbf)     |      | roved, sshd,       |
#   | rove, ssh, wg-go,  |      |   rs 198.18.41.1 (tbf) ----|------|- eth0 198.18.41.2  |
#   | iperf3 -c          |      |   dA, dB: delay-relay TUNs |      | wg-go, iperf3 -s   |
#   +--------------------+      +----------------------------+      +--------------------+
#
# Every packet the router forwards detours through tests/e2e/delay-relay,
# which holds it half the round trip and drops it with the loss rate, then
# leaves through a token bucket (tc tbf) of WAN_RATE Mbit/s whose queue
# holds one bandwidth-delay product. The end hosts' TCP (iperf3, ssh, the
# TLS/TCP transport) uses the congestion control named in each part;
# rove's own is its default (Congestion = bbr).
#
# The matrix is not a full cross product; it covers the targets:
#   clean: every WAN_RTTS, BBR end hosts, every row, upload and download,
#          one stream; a ping through rove's tunnel while rove -L uploads
#   lossy: 50 ms, every WAN_LOSSES and WAN_LOSSY_CCS (BBR without loss is
#          the clean part's), rove -L (QUIC and TCP) and ssh -L upload and
#          download, the IP tunnels upload, one stream
#   multi: 50 ms clean, BBR end hosts, 4 streams through each forward,
#          upload: the total and the spread between the streams
# Figures are the receiver's Mbit/s (iperf3's sum_received) and their
# share of WAN_RATE.
. "$(dirname "$0")/../tests/e2e/fwd-lib.sh"
# shellcheck source=bench/lib-measure.sh
. "$(dirname "$0")/lib-measure.sh"
# shellcheck source=bench/lib-path.sh
. "$(dirname "$0")/lib-path.sh"
# shellcheck source=bench/lib-ssh.sh
. "$(dirname "$0")/lib-ssh.sh"
# shellcheck source=bench/lib-wg.sh
. "$(dirname "$0")/lib-wg.sh"
# shellcheck disable=SC2034 # lib.sh's log() prints it
TEST_NAME=bench-wan
WAN_RATE=${WAN_RATE:-200}
WAN_RTTS=${WAN_RTTS:-10 50 150}
WAN_LOSSES=${WAN_LOSSES:-0 0.1 1 2}
WAN_LOSSY_CCS=${WAN_LOSSY_CCS:-cubic bbr}
WAN_ROWS=${WAN_ROWS:-quic tcp ssh tun wg}
WAN_PARTS=${WAN_PARTS:-clean lossy multi}
BENCH_TIME=${BENCH_TIME:-8}
BENCH_RUNS=${BENCH_RUNS:-1}
T_PORT=5201
ROVE_PORT=15201
SSH_PORT=22022
SSHL_PORT=25201

has() { case " $1 " in *" $2 "*) return 0 ;; esac; return 1; }

has "$WAN_ROWS" ssh && sshd_install
fwd_init "$@"
for p in iperf3 ping tc timeout; do
	command -v $p >/dev/null || die "$p is not installed (scripts/deps.sh installs it)"
done
has "$WAN_ROWS" wg && wg_find
RELAY=$BUILD/tests/delay-relay
[ -x "$RELAY" ] || die "$RELAY is missing (make $RELAY)"

NS_R=rove-$$-wr

# The end hosts' TCP may use any of these; the host's list comes back at
# the end.
ALLOWED_CC=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
FWD_CLEANUP+=("sysctl -qw net.ipv4.tcp_allowed_congestion_control='$ALLOWED_CC'")
sysctl -qw net.ipv4.tcp_allowed_congestion_control="reno bbr cubic" ||
	die "cannot allow bbr and cubic"

router_topo_up "$NS_R"

# host_cc ALGO: the end hosts' TCP congestion control.
host_cc() {
	nsx "$NS_C" sysctl -qw net.ipv4.tcp_congestion_control="$1" &&
		nsx "$NS_S" sysctl -qw net.ipv4.tcp_congestion_control="$1"
}

ready_in() { grep -q '^ready' "$1" 2>/dev/null; }

# path_up RTT LOSS: the delay relay and the bottleneck for one condition.
RELAY_PID=
path_up() {
	local rtt=$1 loss=$2 args=(-t 3600) limit
	RELAY_LOG=relay-$rtt-$loss
	[ "$loss" = 0 ] || args+=(-l "$loss" -s 1)
	bg "$RELAY_LOG" "$NS_R" "$RELAY" "${args[@]}" dA dB $((rtt / 2))
	RELAY_PID=$BG_PID
	wait_for 10 "the delay relay" ready_in "$WORK/$RELAY_LOG.log" || return 1
	relay_routes "$NS_R" || return 1
	# A router's queue: one bandwidth-delay product (at least 64 packets).
	limit=$((WAN_RATE * 1000 * rtt / 8))
	[ "$limit" -ge 96000 ] || limit=96000
	for dev in rc rs; do
		tc -n "$NS_R" qdisc replace dev $dev root tbf rate "${WAN_RATE}mbit" \
			burst 32kb limit "$limit" || return 1
	done
	wait_for 10 "the client reaching the server through the relay" \
		quiet_ping "$NS_C" "$S_ADDR"
}

path_down() {
	[ -n "$RELAY_PID" ] || return 0
	stop_pid "$RELAY_PID"
	forget_pid "$RELAY_PID"
	RELAY_PID=
}

conf_set "$WORK/configs/roved.conf" Listen "$S_ADDR:4433"
conf_set "$WORK/configs/rove.conf" Server "$S_ADDR:4433"
e2e_transport quic "$S_ADDR"
peer_set laptop AllowForward "127.0.0.1/32:$T_PORT"
client_add "$WORK/configs/rove.conf" "LocalForward = $ROVE_PORT = 127.0.0.1:$T_PORT"

# rove_up quic|tcp: roved and the laptop over that transport, the forward
# listening and the tunnel answering (rove_down stops them).
rove_up() {
	conf_set "$WORK/configs/rove.conf" Transport "$1"
	start_roved
	start_client laptop
	wait_established laptop &&
		wait_for 10 "rove's LocalForward" tcp_listening "$NS_C" "$ROVE_PORT" &&
		wait_for 15 "a ping through rove" rove_pings
}

SSH_UP=0
ssh_up() {
	FWD_CLEANUP+=(sshd_rundir_cleanup)
	sshd_start "$NS_S" "$S_ADDR" "$SSH_PORT" "$WORK/ssh" || return 1
	wait_for 10 "sshd" tcp_listening "$NS_S" "$SSH_PORT" || return 1
}
# ssh_connect / ssh_disconnect: the ssh -L session, opened anew for each
# condition (its TCP connection takes the end hosts' congestion control).
ssh_connect() {
	bg ssh "$NS_C" ssh "${SSH_OPTS[@]}" \
		-L "127.0.0.1:$SSHL_PORT:127.0.0.1:$T_PORT" "root@$S_ADDR"
	SSH_PID=$BG_PID
	wait_for 15 "ssh's forward" tcp_listening "$NS_C" "$SSHL_PORT"
}
ssh_disconnect() {
	[ -n "${SSH_PID:-}" ] || return 0
	stop_pid "$SSH_PID"
	forget_pid "$SSH_PID"
	SSH_PID=
}

bg iperf3-server "$NS_S" iperf3 -s -p "$T_PORT"
wait_listen "$NS_S" "$T_PORT" "iperf3"
if has "$WAN_ROWS" ssh; then
	if ssh_up; then SSH_UP=1; else log "ssh -L cannot be set up"; fi
fi

# iperf_run DEST PORT STREAMS DIR: one iperf3 run from the client; prints
# "MBIT SPREAD" (the receiver's total, and the slowest stream's share of
# the fastest in percent), or "failed -".
iperf_run() {
	local json=$WORK/iperf.json rev=()
	[ "$4" = down ] && rev=(-R)
	if ! nsx "$NS_C" timeout -k 5 $((BENCH_TIME + 20)) iperf3 -c "$1" -p "$2" \
		-t "$BENCH_TIME" -P "$3" -J --connect-timeout 5000 "${rev[@]}" \
		>"$json" 2>"$WORK/iperf.err"; then
		echo "failed -"
		return
	fi
	"$PY" - "$json" <<-'EOF' || echo "failed -"
	import json, sys
	d = json.load(open(sys.argv[1]))
	end = d["end"]
	tot = end["sum_received"]["bits_per_second"] / 1e6
	per = [s["receiver"]["bits_per_second"] for s in end.get("streams", [])
	       if "receiver" in s]
	spread = "%.0f" % (100 * min(per) / max(per)) if len(per) > 1 and max(per) > 0 else "-"
	print("%.1f %s" % (tot, spread))
	EOF
}

# wait_gone PID SECONDS: let a background process end on its own, and
# stop it if it overstays.
wait_gone() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$1" 2>/dev/null && kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	forget_pid "$1"
}

# ping_avg COUNT DEST: average RTT in ms of COUNT pings 0.1 s apart.
ping_avg() {
	nsx "$NS_C" ping -n -q -i 0.1 -c "$1" -W 2 "$2" 2>&1 |
		sed -n 's|^rtt min/avg/max/mdev = [^/]*/\([^/]*\)/.*|\1|p'
}

# Results: R[PART/COND/ROW/DIR/STREAMS] = "run run ..." (Mbit/s), S[...]
# the spreads, P[COND] "idle loaded" pings.
declare -A R S P
ORDER=()
record() {
	local key=$1 out=$2 mbit spread
	read -r mbit spread <<<"$out"
	[ -n "${R[$key]+x}" ] || ORDER+=("$key")
	R[$key]="${R[$key]:-}${R[$key]:+ }$mbit"
	[ "$spread" = - ] || S[$key]="${S[$key]:-}${S[$key]:+ }$spread"
	log "$key: $mbit Mbit/s${spread:+ (slowest/fastest stream $spread%)}"
}

# measure PART COND ROW DIR STREAMS [PING]: one cell; the tunnel or
# forward is set up for it and removed after.
measure() {
	local part=$1 cond=$2 row=$3 dir=$4 streams=$5 key out idle ping_pid
	key=$part/$cond/$row/$dir/$streams
	case $row in
	quic|tcp|tun)
		if ! rove_up "$([ "$row" = tcp ] && echo tcp || echo quic)"; then
			rove_down
			record "$key" "failed -"
			return
		fi
		if [ "$row" = tun ]; then
			out=$(iperf_run "$SRV_TUN4" "$T_PORT" "$streams" "$dir")
		elif [ -n "${6:-}" ]; then
			# The ping through the tunnel, idle and then while the
			# forward carries the run (from its second second on).
			idle=$(ping_avg 20 "$SRV_TUN4")
			(sleep 2 && exec ip netns exec "$NS_C" ping -n -q -i 0.1 \
				-c $(((BENCH_TIME - 3) * 10)) -W 2 "$SRV_TUN4") \
				>"$WORK/ping-loaded.log" 2>&1 &
			ping_pid=$!
			E2E_PIDS+=("$ping_pid")
			out=$(iperf_run 127.0.0.1 "$ROVE_PORT" "$streams" "$dir")
			wait_gone "$ping_pid" 10
			P[$cond]="${idle:-failed} $(sed -n 's|^rtt min/avg/max/mdev = [^/]*/\([^/]*\)/.*|\1|p' \
				"$WORK/ping-loaded.log" | grep . || echo failed)"
			log "ping through rove's tunnel at $cond: idle/loaded ${P[$cond]} ms"
		else
			out=$(iperf_run 127.0.0.1 "$ROVE_PORT" "$streams" "$dir")
		fi
		rove_down
		;;
	ssh)
		[ "$SSH_UP" = 1 ] && ssh_connect || { ssh_disconnect; record "$key" "failed -"; return; }
		out=$(iperf_run 127.0.0.1 "$SSHL_PORT" "$streams" "$dir")
		ssh_disconnect
		;;
	wg)
		if wg_up n "$WG_NEW_BIN" "$NS_S" "$NS_C" "$S_ADDR"; then
			out=$(iperf_run "$WG_S_ADDR" "$T_PORT" "$streams" "$dir")
		else
			out="failed -"
		fi
		wg_down
		;;
	esac
	record "$key" "$out"
}

# cell PART COND ROW DIR STREAMS [PING]: BENCH_RUNS measurements.
cell() {
	local i
	for ((i = 1; i <= BENCH_RUNS; i++)); do
		measure "$@"
	done
}

START=$(date +%s)
if has "$WAN_PARTS" clean; then
	host_cc bbr
	for rtt in $WAN_RTTS; do
		cond="${rtt}ms-0%-bbr"
		log "--- $cond"
		path_up "$rtt" 0 || { log "the path does not come up"; path_down; continue; }
		for dir in up down; do
			for row in quic tcp ssh tun wg; do
				has "$WAN_ROWS" $row || continue
				# The IP tunnels, for reference: upload at 50 ms.
				case $row in tun|wg)
					[ "$rtt" = 50 ] && [ "$dir" = up ] || continue ;;
				esac
				ping=
				[ "$row" = quic ] && [ "$dir" = up ] && ping=1
				cell clean "$cond" $row $dir 1 $ping
			done
		done
		path_down
	done
fi
if has "$WAN_PARTS" lossy; then
	for cc in $WAN_LOSSY_CCS; do
		host_cc "$cc" || die "cannot set the end hosts' TCP to $cc"
		for loss in $WAN_LOSSES; do
			# The clean part has measured this one already.
			if [ "$cc" = bbr ] && [ "$loss" = 0 ] && has "$WAN_PARTS" clean &&
				has "$WAN_RTTS" 50; then
				continue
			fi
			cond="50ms-$loss%-$cc"
			log "--- $cond"
			path_up 50 "$loss" || { log "the path does not come up"; path_down; continue; }
			for dir in up down; do
				for row in quic tcp ssh tun wg; do
					has "$WAN_ROWS" $row || continue
					case $row in tun|wg) [ "$dir" = up ] || continue ;; esac
					cell lossy "$cond" $row $dir 1
				done
			done
			path_down
		done
	done
fi
if has "$WAN_PARTS" multi; then
	host_cc bbr
	cond="50ms-0%-bbr"
	log "--- $cond, 4 streams"
	if path_up 50 0; then
		for row in quic tcp ssh; do
			has "$WAN_ROWS" $row || continue
			cell multi "$cond" $row up 4
		done
	fi
	path_down
fi
ELAPSED=$(($(date +%s) - START))

name() {
	case $1 in
	quic) echo "rove -L (QUIC)" ;;
	tcp) echo "rove -L (TLS/TCP)" ;;
	ssh) echo "ssh -L" ;;
	tun) echo "rove IP tunnel" ;;
	wg) echo "wireguard-go ${WG_NEW_VER:-}" ;;
	esac
}

echo
printf 'WAN forwards: bottleneck %s Mbit/s each way (tc tbf, one BDP of queue), delay relay; %s s iperf3 runs, median of %s; rove Congestion = bbr; %s CPUs, kernel %s\n' \
	"$WAN_RATE" "$BENCH_TIME" "$BENCH_RUNS" "$(nproc)" "$(uname -r)"
printf '%-6s %-16s %-24s %-5s %3s %10s %7s %8s\n' part condition row dir st Mbit/s '% bneck' 'spread'
for key in "${ORDER[@]}"; do
	IFS=/ read -r part cond row dir st <<<"$key"
	# shellcheck disable=SC2086 # the runs are a list
	m=$(median 1 ${R[$key]})
	pct=-
	[ "$m" = failed ] || pct=$(awk -v m="$m" -v r="$WAN_RATE" 'BEGIN { printf "%.0f", 100 * m / r }')
	sp=-
	# shellcheck disable=SC2086
	[ -z "${S[$key]:-}" ] || sp="$(median 1 ${S[$key]})%"
	printf '%-6s %-16s %-24s %-5s %3s %10s %7s %8s\n' "$part" "$cond" "$(name "$row")" \
		"$dir" "$st" "$m" "$pct" "$sp"
done
for cond in "${!P[@]}"; do
	read -r idle loaded <<<"${P[$cond]}"
	printf 'ping through rove'"'"'s tunnel, %s: idle %s ms, while rove -L uploads %s ms (target: at most %s ms)\n' \
		"$cond" "$idle" "$loaded" \
		"$(awk -v i="$idle" 'BEGIN { if (i + 0 > 0) printf "%.1f", 1.5 * i + 10; else print "-" }')"
done
printf 'runs: %s\n' "$(for k in "${ORDER[@]}"; do printf '%s=[%s] ' "$k" "${R[$k]}"; done)"
echo "measured in ${ELAPSED} s"
e2e_finish
