#!/usr/bin/env bash
# UDP through a rove UDP forward (LocalForward = udp/...) against the same
# UDP through rove's IP tunnel and straight over the link, in one run:
# datagrams per second and Mbit/s at 1200-byte payloads, CPU per GB, and
# the round trip a UDP echo adds; first on a clean veth, then on a path of
# 25 ms each way with 1% loss.
#
# usage: bench/udpfwd.sh BUILD_DIR
#   BENCH_TIME=SECONDS   length of each iperf3 run (default 5)
#   UDP_LOSS_OK=PERCENT  the loss a paced run may have to count as carried
#                        (default 1)
#   UDP_STEPS=N          paced runs at most per path on the clean link
#                        (default 4)
#   UDP_PAIRS=N          pairs of runs at one rate (default 3)
#   UDP_ECHOES=N         echoes per path, 1 ms apart (default 2000)
#   UDP_ROUNDS=N         rounds the echoes are sent in (default 4)
#   UDP_IMPAIRED_RATE=MBIT  the paced rate of the impaired runs (default 50)
#   UDP_DELAY=MS         one-way delay of the impaired path (default 25)
#   UDP_LOSS=PERCENT     random loss per direction of the impaired path
#                        (default 1)
#   UDP_PARTS="clean impaired"  which parts to run
#
# Part 1, clean: two namespaces on one veth (bench/lib-path.sh's
# veth_topo_up), iperf3 -s and an echo server (tests/e2e/udp-echo.py)
# in $NS_S, the client side in $NS_C:
#
#   $NS_C (client) eth0 198.18.1.2/24 <---- veth ----> eth0 198.18.1.1/24 $NS_S (server)
#   direct:       UDP to 198.18.1.1
#   IP tunnel:    rove (configs/rove.conf) -> roved, UDP to 198.19.77.1
#                 through rove's TUN (MTU 1380)
#   UDP forward:  UDP to 127.0.0.1 in $NS_C, where the same rove listens
#                 (LocalForward = udp/5201 and udp/7301), each source a
#                 flow whose datagrams ride QUIC DATAGRAM frames to roved,
#                 which sends them on to 127.0.0.1 in $NS_S; iperf3's
#                 control connection takes a TCP forward on the same port
#
# Part 2, impaired: the same three paths through bench/lib-path.sh's
# router, whose forwarded packets detour through tests/e2e/delay-relay,
# held UDP_DELAY ms and lost with UDP_LOSS percent probability (seed 1)
# each way (netem is not needed).
#
# Throughput (clean): iperf3 -u -l 1200 -w 2M, first unpaced (-b 0) for
# BENCH_TIME s, which gives what the path delivers when overrun; then
# paced at 90% of that, stepping down by a quarter while more than
# UDP_LOSS_OK percent is lost (at most UDP_STEPS runs). The table shows
# the last paced run: the rate asked, the receiver's Mbit/s and thousand
# datagrams per second (datagrams sent minus those iperf3 counts lost),
# the loss, and CPU seconds per GB: user + system time of rove and roved
# (/proc/PID/stat) during that run over the gigabytes delivered ("-" for
# direct, which has no tunnel). Since a datagram costs less the more of
# them one wake-up finds, the tunnel and the forward then run again at
# one rate, the lower of the two they carried, in UDP_PAIRS pairs of
# runs (which goes first alternating, so that a change in the machine's
# load falls on both alike), and the ratio of CPU per GB is the median of
# the pairs' ratios. Both ends, iperf3 and rove share the
# machine's CPUs, so the absolute figures are this machine's; the ratios
# are the point.
#
# Latency: bench/udp-rtt.py, the same client for every path, sends
# echoes of 1200 bytes 1 ms apart from one socket (one flow), after one
# warm-up echo that sets a forward's flow up. Each path gets UDP_ECHOES
# in all, in UDP_ROUNDS rounds that go over the three paths in an order
# turning by one each round, so that a spell of load from elsewhere on
# the machine falls on every path alike; p50 and p99 are of all a path's
# round trips, and "added" is the path's figure minus direct's in the
# same part. Ratios: UDP forward / IP tunnel in CPU
# per GB at one rate (target: at most 1.3) and at each one's own, and the
# forward's added p99 (target: under 1 ms on the veth).
#
# Impaired: iperf3 -u -l 1200 paced at UDP_IMPAIRED_RATE Mbit/s for
# BENCH_TIME s (the share delivered; rove's LossRecovery, which works on
# the IP tunnel's packets, is its default, auto), and the same echoes
# (p50/p99 of the answered ones, and how many were lost).
. "$(dirname "$0")/../tests/e2e/fwd-lib.sh"
# shellcheck source=bench/lib-measure.sh
. "$(dirname "$0")/lib-measure.sh"
# shellcheck source=bench/lib-path.sh
. "$(dirname "$0")/lib-path.sh"
# shellcheck disable=SC2034 # lib.sh's log() prints it
TEST_NAME=bench-udpfwd
BENCH_TIME=${BENCH_TIME:-5}
UDP_LOSS_OK=${UDP_LOSS_OK:-1}
UDP_STEPS=${UDP_STEPS:-4}
UDP_ECHOES=${UDP_ECHOES:-2000}
UDP_ROUNDS=${UDP_ROUNDS:-4}
UDP_PAIRS=${UDP_PAIRS:-3}
UDP_IMPAIRED_RATE=${UDP_IMPAIRED_RATE:-50}
UDP_DELAY=${UDP_DELAY:-25}
UDP_LOSS=${UDP_LOSS:-1}
UDP_PARTS=${UDP_PARTS:-clean impaired}
PERF_PORT=5201
ECHO_PORT=7301
PAYLOAD=1200
# iperf3's socket buffers at both ends (-w): a receiver that misses a few
# milliseconds of CPU on this shared machine drops what its default
# 208 KB buffer cannot hold, which is not the path's doing.
SOCKBUF=2M
ECHO=$E2E_DIR/udp-echo.py
RTT=$(cd "$(dirname "$0")" && pwd)/udp-rtt.py
PATHS="direct tunnel forward"

fwd_init "$@"
for p in iperf3 ping timeout; do
	command -v $p >/dev/null || die "$p is not installed (scripts/deps.sh installs it)"
done
RELAY=$BUILD/tests/delay-relay
case " $UDP_PARTS " in *" impaired "*)
	[ -x "$RELAY" ] || die "$RELAY is missing (make $RELAY)" ;;
esac

peer_set laptop AllowForward \
	"127.0.0.1/32:$PERF_PORT, udp/127.0.0.1/32:$PERF_PORT, udp/127.0.0.1/32:$ECHO_PORT"
client_add "$WORK/configs/rove.conf" \
	"LocalForward = $PERF_PORT = 127.0.0.1:$PERF_PORT" \
	"LocalForward = udp/$PERF_PORT = 127.0.0.1:$PERF_PORT" \
	"LocalForward = udp/$ECHO_PORT = 127.0.0.1:$ECHO_PORT"
# QUIC only: a stall never moves the session to TLS on TCP mid-run.
client_add "$WORK/configs/rove.conf" "Transport = quic"

# ratio A B: A / B to two places, or "-".
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.2f", a / b;
		else printf "-" }'
}
udp_bound() { [ -n "$(nsx "$1" ss -Hlun "sport = :$2")" ]; }
ready_in() { grep -q '^ready' "$1" 2>/dev/null; }

# servers_up: iperf3 -s and the echo server in $NS_S.
servers_up() {
	bg iperf3-server "$NS_S" iperf3 -s -p "$PERF_PORT"
	IPERF_PID=$BG_PID
	bg echo-server "$NS_S" "$PY" "$ECHO" serve 0.0.0.0 "$ECHO_PORT"
	ECHO_PID=$BG_PID
	wait_listen "$NS_S" "$PERF_PORT" "iperf3"
	wait_for 10 "the echo server" udp_bound "$NS_S" "$ECHO_PORT" ||
		die "the echo server does not bind udp/$ECHO_PORT"
}

# rove_up: roved and the laptop's rove, the tunnel answering a ping and
# the forwards bound.
rove_up() {
	start_roved
	start_client laptop
	wait_established laptop &&
		wait_for 15 "a ping through rove" rove_pings &&
		wait_for 10 "rove's udp/$PERF_PORT" udp_bound "$NS_C" "$PERF_PORT" &&
		wait_for 10 "rove's udp/$ECHO_PORT" udp_bound "$NS_C" "$ECHO_PORT" &&
		wait_for 10 "rove's LocalForward $PERF_PORT" tcp_listening "$NS_C" "$PERF_PORT"
}

# part_down: everything of one part stopped, its namespaces removed.
part_down() {
	rove_down
	stop_pids "${ECHO_PID:-}" "${IPERF_PID:-}" "${RELAY_PID:-}"
	ECHO_PID='' IPERF_PID='' RELAY_PID=''
	local ns
	for ns in "$NS_C" "$NS_S" "${NS_R:-}"; do
		[ -n "$ns" ] && ip netns del "$ns" 2>/dev/null
	done
	return 0
}

# dest PATH: where the client sends for that path.
dest() {
	case $1 in
	direct) echo "$TARGET" ;;
	tunnel) echo "$SRV_TUN4" ;;
	forward) echo 127.0.0.1 ;;
	esac
}

# rcvbuf_errs NS: the namespace's UDP datagrams dropped for a full
# receive buffer (RcvbufErrors of /proc/net/snmp), IPv4 and IPv6.
rcvbuf_errs() {
	nsx "$1" cat /proc/net/snmp /proc/net/snmp6 2>/dev/null | awk '
		/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "RcvbufErrors") c = i; h = 1 }
			  else n += $c }
		$1 == "Udp6RcvbufErrors" { n += $2 }
		END { print n + 0 }'
}

# udp_run NAME DEST RATE PID...: iperf3 -u -l 1200 -b RATE (in Mbit/s,
# 0: unpaced) for BENCH_TIME s from $NS_C; sets MBIT (delivered), KDPS
# (thousand datagrams delivered per second), LOSS (%), CPU (s/GB of the
# PIDs; "-" without any), BYTES and RCVBUF ("CLIENT/SERVER": datagrams
# the kernel dropped at a full socket buffer in each namespace, rove's
# and roved's sockets included); returns 1 if iperf3 failed.
udp_run() {
	local name=$1 host=$2 rate=$3 json c0 c1 out
	shift 3
	json=$WORK/iperf-$name-$rate.json
	MBIT=failed KDPS=failed LOSS=failed CPU=- BYTES=0 RCVBUF=-
	local e0c e0s
	e0c=$(rcvbuf_errs "$NS_C") e0s=$(rcvbuf_errs "$NS_S")
	c0=$( [ $# -gt 0 ] && cpu_ticks "$@")
	if ! nsx "$NS_C" timeout -k 5 $((BENCH_TIME + 20)) iperf3 -u -l "$PAYLOAD" \
		-w "$SOCKBUF" -b "${rate}M" -t "$BENCH_TIME" -c "$host" -p "$PERF_PORT" -J \
		--connect-timeout 5000 >"$json" 2>"$WORK/iperf-$name.err"; then
		log "iperf3 -u to $host ($name, ${rate} Mbit/s) failed: $(head -c 300 "$json" "$WORK/iperf-$name.err")"
		return 1
	fi
	c1=$( [ $# -gt 0 ] && cpu_ticks "$@")
	RCVBUF=$(($(rcvbuf_errs "$NS_C") - e0c))/$(($(rcvbuf_errs "$NS_S") - e0s))
	# The sender's count of datagrams and the receiver's of those lost
	# (iperf3 -u reports both in the client's end.sum).
	out=$("$PY" - "$json" "$PAYLOAD" <<-'EOF'
	import json, sys
	s = json.load(open(sys.argv[1]))["end"]["sum"]
	got = s["packets"] - s["lost_packets"]
	secs = s["seconds"]
	loss = 100.0 * s["lost_packets"] / s["packets"] if s["packets"] else 100.0
	print("%.1f %.1f %.2f %d" % (got * int(sys.argv[2]) * 8 / secs / 1e6,
	                             got / secs / 1e3, loss, got * int(sys.argv[2])))
	EOF
	) || { log "iperf3 -u ($name): no result in $json"; return 1; }
	read -r MBIT KDPS LOSS BYTES <<<"$out"
	if [ $# -gt 0 ] && [ "$BYTES" -gt 0 ]; then
		CPU=$(cpu_per_gb $((c1 - c0)) "$BYTES")
	fi
	log "$name at $([ "$rate" = 0 ] && echo unpaced || echo "$rate Mbit/s"): $MBIT Mbit/s, $KDPS k datagrams/s delivered, $LOSS% lost, CPU $CPU s/GB, socket buffer drops client/server $RCVBUF"
}

# echo_round PART KEY: UDP_ECHOES / UDP_ROUNDS echoes 1 ms apart to the
# path, their round trips appended to $WORK/rtt-PART-KEY.txt and the
# unanswered added to R[PART.KEY.elost].
echo_round() {
	local out lost
	# After a throughput run or another path's echoes: queues drain first.
	sleep 0.5
	out=$(nsx "$NS_C" timeout -k 5 $((UDP_ECHOES / UDP_ROUNDS / 1000 + 20)) "$PY" "$RTT" \
		"$(dest "$2")" "$ECHO_PORT" $((UDP_ECHOES / UDP_ROUNDS)) 1 "$PAYLOAD" 2 \
		"$WORK/rtt-$1-$2.txt" 2>&1)
	log "$1, $2 echoes: $out"
	lost=$(jfield "$out" lost)
	case $lost in
	[0-9]*) R[$1.$2.elost]=$((${R[$1.$2.elost]:-0} + lost)) ;;
	*) R[$1.$2.efail]=1 ;;
	esac
}

# echo_rounds PART KEY...: UDP_ROUNDS rounds of echoes over the paths, the
# order turning by one each round (so a spell of load from elsewhere on
# the machine falls on every path alike); then R[PART.KEY.p50/p99].
echo_rounds() {
	local part=$1 keys=("${@:2}") r i n=$(($# - 1)) key out
	for key in "${keys[@]}"; do
		: >"$WORK/rtt-$part-$key.txt"
		R[$part.$key.elost]=0
		R[$part.$key.efail]=0
	done
	for ((r = 0; r < UDP_ROUNDS; r++)); do
		for ((i = 0; i < n; i++)); do
			echo_round "$part" "${keys[(i + r) % n]}"
		done
	done
	for key in "${keys[@]}"; do
		R[$part.$key.p50]=failed R[$part.$key.p99]=failed
		[ "${R[$part.$key.efail]}" = 0 ] || continue
		out=$("$PY" - "$WORK/rtt-$part-$key.txt" <<-'EOF2'
		import math, sys
		ms = sorted(float(x) for x in open(sys.argv[1]) if x.strip())
		k = lambda p: ms[max(0, math.ceil(p * len(ms)) - 1)]
		print("%.3f %.3f" % (k(0.5), k(0.99)) if ms else "failed failed")
		EOF2
		) || continue
		R[$part.$key.p50]=${out% *} R[$part.$key.p99]=${out#* }
	done
}

# Results: R[PART.PATH.FIELD], FIELD rate (asked, Mbit/s), mbit, kdps,
# loss, cpu (the last paced run), eloss, ecpu (the run at one rate for the
# tunnel and the forward), p50, p99, elost (echoes).
declare -A R
FIELDS="rate mbit kdps loss cpu p50 p99 elost eloss ecpu rcvbuf"
for part in clean impaired; do
	for key in $PATHS; do
		for f in $FIELDS; do R[$part.$key.$f]=skipped; done
	done
done

# clean_tput KEY PID...: the rate search of one path.
clean_tput() {
	local key=$1 host rate step
	shift
	host=$(dest "$key")
	R[clean.$key.rate]=failed R[clean.$key.mbit]=failed R[clean.$key.kdps]=failed
	R[clean.$key.loss]=failed R[clean.$key.cpu]=-
	udp_run "$key" "$host" 0 "$@" || return 0
	rate=$(awk -v m="$MBIT" 'BEGIN { printf "%d", m * 0.9 }')
	for ((step = 0; step < UDP_STEPS && rate > 0; step++)); do
		udp_run "$key" "$host" "$rate" "$@" || break
		R[clean.$key.rate]=$rate R[clean.$key.mbit]=$MBIT R[clean.$key.kdps]=$KDPS
		R[clean.$key.loss]=$LOSS R[clean.$key.cpu]=$CPU R[clean.$key.rcvbuf]=$RCVBUF
		awk -v l="$LOSS" -v ok="$UDP_LOSS_OK" 'BEGIN { exit !(l <= ok) }' && break
		rate=$((rate * 3 / 4))
	done
}

# equal_rate: the tunnel and the forward again at one rate, the lower of
# the two they carried (CPU per GB depends on the rate: the more
# datagrams one wake-up finds, the less each costs), in UDP_PAIRS pairs
# of runs, which of the two goes first alternating; sets the medians
# R[clean.KEY.ecpu] and .eloss, and EQ_RATIO, the median of the pairs'
# ratios forward / tunnel.
EQ_RATE=0 EQ_RATIO=failed
equal_rate() {
	local key i order cpu ratios=() t f
	declare -A runs=()
	EQ_RATE=$(awk -v a="${R[clean.tunnel.rate]}" -v b="${R[clean.forward.rate]}" 'BEGIN {
		if (a ~ /^[0-9]+$/ && b ~ /^[0-9]+$/) print (a < b ? a : b); else print 0 }')
	R[clean.tunnel.eloss]=failed R[clean.tunnel.ecpu]=failed
	R[clean.forward.eloss]=failed R[clean.forward.ecpu]=failed
	[ "$EQ_RATE" -gt 0 ] || return 0
	for ((i = 0; i < UDP_PAIRS; i++)); do
		order="tunnel forward"
		[ $((i % 2)) = 1 ] && order="forward tunnel"
		t=failed f=failed
		for key in $order; do
			cpu=failed
			udp_run "$key-equal" "$(dest "$key")" "$EQ_RATE" "$ROVED_PID" "$LAP_PID" && {
				cpu=$CPU
				runs[$key.loss]+=" $LOSS"
				runs[$key.cpu]+=" $CPU"
			}
			if [ "$key" = tunnel ]; then t=$cpu; else f=$cpu; fi
		done
		ratios+=("$(ratio "$f" "$t")")
	done
	for key in tunnel forward; do
		# shellcheck disable=SC2086 # the runs are a list
		R[clean.$key.ecpu]=$(median 2 ${runs[$key.cpu]:-})
		# shellcheck disable=SC2086
		R[clean.$key.eloss]=$(median 2 ${runs[$key.loss]:-})
	done
	EQ_RATIO=$(median 2 "${ratios[@]}")
	log "forward / tunnel CPU per GB at $EQ_RATE Mbit/s, pair by pair: ${ratios[*]}"
	EQ_PAIRS="${ratios[*]}"
}

# impaired_tput KEY: the paced run of one path.
impaired_tput() {
	R[impaired.$1.rate]=$UDP_IMPAIRED_RATE
	udp_run "$1" "$(dest "$1")" "$UDP_IMPAIRED_RATE" || true
	R[impaired.$1.mbit]=$MBIT R[impaired.$1.kdps]=$KDPS R[impaired.$1.loss]=$LOSS
	R[impaired.$1.rcvbuf]=$RCVBUF
	R[impaired.$1.cpu]=-
}

# part PART: servers and rove up in the part's namespaces, then its runs.
run_part() {
	local part=$1 key f paths=(direct)
	servers_up
	if rove_up; then
		paths+=(tunnel forward)
	else
		log "$part: rove's tunnel does not come up"
		for key in tunnel forward; do
			for f in $FIELDS; do R[$part.$key.$f]=failed; done
		done
	fi
	for key in "${paths[@]}"; do
		if [ "$part" = impaired ]; then
			impaired_tput "$key"
		elif [ "$key" = direct ]; then
			clean_tput direct
		else
			clean_tput "$key" "$ROVED_PID" "$LAP_PID"
		fi
	done
	[ "$part" = clean ] && [ ${#paths[@]} = 3 ] && equal_rate
	sleep 2
	echo_rounds "$part" "${paths[@]}"
	if [ ${#paths[@]} = 3 ]; then
		status "$NS_S" "$ROVED_SOCK" >"$WORK/roved-status-$part.json" 2>/dev/null
		log "$part: roved's UDP counters for the laptop: $(jget 'peers[name=laptop].udp_counters' <"$WORK/roved-status-$part.json" 2>/dev/null)"
	fi
	part_down
}

START=$(date +%s)
if [[ " $UDP_PARTS " == *" clean "* ]]; then
	log "--- clean veth"
	veth_topo_up
	TARGET=$SRV_OUTER
	run_part clean
fi
if [[ " $UDP_PARTS " == *" impaired "* ]]; then
	log "--- impaired: ${UDP_DELAY} ms each way, $UDP_LOSS% loss each way"
	NS_R=rove-$$-ur
	router_topo_up "$NS_R"
	bg relay "$NS_R" "$RELAY" -t 900 -l "$UDP_LOSS" -s 1 dA dB "$UDP_DELAY"
	RELAY_PID=$BG_PID
	wait_for 10 "the delay relay" ready_in "$WORK/relay.log" ||
		die "delay-relay does not start: $(head -c 300 "$WORK/relay.log")"
	relay_routes "$NS_R" || die "cannot route through the delay relay"
	wait_for 10 "the client reaching the server through the relay" \
		quiet_ping "$NS_C" "$S_ADDR" || die "the impaired path does not come up"
	conf_set "$WORK/configs/roved.conf" Listen "$S_ADDR:4433"
	conf_set "$WORK/configs/rove.conf" Server "$S_ADDR:4433"
	TARGET=$S_ADDR
	run_part impaired
fi
ELAPSED=$(($(date +%s) - START))

# added A B: A - B to three places (a path's round trip over direct's).
added() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/) printf "%.3f", a - b;
		else printf "-" }'
}
# over_direct PART KEY FIELD: the path's FIELD minus direct's, "-" for direct.
over_direct() {
	if [ "$2" = direct ]; then
		echo -
	else
		added "${R[$1.$2.$3]}" "${R[$1.direct.$3]}"
	fi
}
label() {
	case $1 in
	direct) echo "direct" ;;
	tunnel) echo "IP tunnel (TUN)" ;;
	forward) echo "UDP forward (udp/)" ;;
	esac
}

echo
echo "UDP forward vs IP tunnel vs direct: ${PAYLOAD}-byte payloads, iperf3 -u runs of $BENCH_TIME s, $UDP_ECHOES echoes 1 ms apart; $(nproc) CPUs, kernel $(uname -r)"
if [[ " $UDP_PARTS " == *" clean "* ]]; then
	echo
	echo "clean veth: the last paced run of each path (loss at most $UDP_LOSS_OK% or $UDP_STEPS steps down)"
	printf '%-20s %8s %10s %9s %7s %9s %8s %8s %9s %9s\n' path "asked" delivered delivered loss "CPU" "echo" "echo" "added" "added"
	printf '%-20s %8s %10s %9s %7s %9s %8s %8s %9s %9s\n' "" "Mbit/s" "Mbit/s" "kdgram/s" "%" "s/GB" "p50 ms" "p99 ms" "p50 ms" "p99 ms"
	for key in $PATHS; do
		printf '%-20s %8s %10s %9s %7s %9s %8s %8s %9s %9s\n' "$(label "$key")" \
			"${R[clean.$key.rate]}" "${R[clean.$key.mbit]}" "${R[clean.$key.kdps]}" \
			"${R[clean.$key.loss]}" "${R[clean.$key.cpu]}" "${R[clean.$key.p50]}" \
			"${R[clean.$key.p99]}" \
			"$(over_direct clean "$key" p50)" \
			"$(over_direct clean "$key" p99)"
	done
	printf 'datagrams dropped at a full socket buffer in that run, client/server namespace: %s\n' \
		"$(for key in $PATHS; do printf '%s %s; ' "$key" "${R[clean.$key.rcvbuf]}"; done)"
	CPU_EQ=$EQ_RATIO
	ADD99=$(added "${R[clean.forward.p99]}" "${R[clean.direct.p99]}")
	echo
	echo "UDP forward / IP tunnel:"
	printf '  CPU per GB at one rate, %s Mbit/s asked of both, %s pairs of runs (medians: tunnel %s s/GB, %s%% lost; forward %s s/GB, %s%% lost; pairs %s): %s (target: at most 1.3: %s)\n' \
		"$EQ_RATE" "$UDP_PAIRS" "${R[clean.tunnel.ecpu]}" "${R[clean.tunnel.eloss]}" \
		"${R[clean.forward.ecpu]}" "${R[clean.forward.eloss]}" "${EQ_PAIRS:--}" "$CPU_EQ" \
		"$(awk -v r="$CPU_EQ" 'BEGIN { if (r !~ /^[0-9.]+$/) print "-"; else print (r <= 1.3 ? "met" : "missed") }')"
	printf '  CPU per GB at each one'"'"'s own rate (the table): %s; delivered Mbit/s %s; added p50 %s; added p99 %s\n' \
		"$(ratio "${R[clean.forward.cpu]}" "${R[clean.tunnel.cpu]}")" \
		"$(ratio "${R[clean.forward.mbit]}" "${R[clean.tunnel.mbit]}")" \
		"$(ratio "$(over_direct clean forward p50)" "$(over_direct clean tunnel p50)")" \
		"$(ratio "$(over_direct clean forward p99)" "$(over_direct clean tunnel p99)")"
	printf 'UDP forward added p99: %s ms (target: under 1 ms: %s)\n' "$ADD99" \
		"$(awk -v a="$ADD99" 'BEGIN { if (a !~ /^-?[0-9.]+$/) print "-"; else print (a < 1 ? "met" : "missed") }')"
fi
if [[ " $UDP_PARTS " == *" impaired "* ]]; then
	echo
	echo "impaired: ${UDP_DELAY} ms each way, $UDP_LOSS% random loss each way (delay-relay, seed 1), paced at $UDP_IMPAIRED_RATE Mbit/s"
	printf '%-20s %10s %8s %7s %8s %8s %9s %9s %8s\n' path delivered share loss "echo" "echo" "added" "added" "echoes"
	printf '%-20s %10s %8s %7s %8s %8s %9s %9s %8s\n' "" "Mbit/s" "%" "%" "p50 ms" "p99 ms" "p50 ms" "p99 ms" "lost"
	for key in $PATHS; do
		printf '%-20s %10s %8s %7s %8s %8s %9s %9s %8s\n' "$(label "$key")" \
			"${R[impaired.$key.mbit]}" \
			"$(awk -v m="${R[impaired.$key.mbit]}" -v r="$UDP_IMPAIRED_RATE" 'BEGIN {
				if (m ~ /^[0-9.]+$/) printf "%.1f", 100 * m / r; else print "-" }')" \
			"${R[impaired.$key.loss]}" "${R[impaired.$key.p50]}" "${R[impaired.$key.p99]}" \
			"$(over_direct impaired "$key" p50)" \
			"$(over_direct impaired "$key" p99)" \
			"${R[impaired.$key.elost]}"
	done
	printf 'datagrams dropped at a full socket buffer in the paced run, client/server namespace: %s\n' \
		"$(for key in $PATHS; do printf '%s %s; ' "$key" "${R[impaired.$key.rcvbuf]}"; done)"
fi
echo "measured in ${ELAPSED} s"
for part in clean impaired; do
	[[ " $UDP_PARTS " == *" $part "* ]] || continue
	for key in $PATHS; do
		for f in mbit p50; do
			if [ "${R[$part.$key.$f]}" = failed ]; then
				fail "$part, $key: a measurement failed"
				break
			fi
		done
	done
done
e2e_finish
