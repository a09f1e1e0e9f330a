# A handshake flood against roved, measured: used by tests/e2e/test-flood.sh
# (which checks the figures) and bench/flood.sh (which tabulates them).
# Sources lib.sh and adds one namespace to its topology:
#
#                     $NS_SW: bridge br0
#      +-------------+-------------+-------------+
#      | p-srv       | p-lap       | p-br        | p-fl
#   $NS_SRV       $NS_LAP       $NS_BR        $NS_FL  eth0 198.19.200.9/24
#   roved         rove laptop   rove branch   tests/e2e/quic-flood
#   198.18.1.1    198.18.1.2    198.18.1.3
#
# The flooder shares the clients' link but not their prefix (the two
# subnets are routed on-link both ways), so that a limit per source prefix
# can tell them apart, as it would on the Internet. Spoofed sources come
# from $SPOOF_NET, which contains no address in use; roved's answers to
# them are routed to the flooder's namespace, which does not forward and
# so drops them: nothing leaves the test's namespaces. An nftables counter
# there counts what roved sent back, whichever source it went to.
#
# flood_build COUNT builds the Initials once; flood_phase MODE COUNT runs
# one measured flood on a fresh roved with an established laptop (see there
# for the figures it leaves in FLOOD_*).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The variables set here are read by the scripts that source this file.
# shellcheck disable=SC2034
NS_FL=rove-$$-fl
FL_NET=198.19.200.0/24
FL_OUTER=198.19.200.9
SPOOF_NET=198.19.128.0/18
FLOOD_TOOL=
CLK_TCK=$(getconf CLK_TCK)
# Bounds of one phase, each loop stopping by itself.
FLOOD_LIMIT_S=${FLOOD_LIMIT_S:-30}       # quic-flood -t: building and sending
FLOOD_ADMIT_MAX_S=${FLOOD_ADMIT_MAX_S:-10} # how long admission is waited for
FLOOD_QUIET_MAX_S=${FLOOD_QUIET_MAX_S:-10} # how long roved may stay busy
FLOOD_PING_COUNT=${FLOOD_PING_COUNT:-350} # 7 s of pings at 20 ms, 2 s more for answers
FLOOD_ASAN=0

flood_init() {
	e2e_init "$@"
	FLOOD_TOOL=$BUILD/tests/quic-flood
	[ -x "$FLOOD_TOOL" ] || die "$FLOOD_TOOL is missing; run make $(basename "$BUILD")/tests/quic-flood"
	if nm -D "$BUILD/roved" 2>/dev/null | grep -q __asan_init ||
		grep -q __asan_init "$BUILD/roved"; then
		FLOOD_ASAN=1
		# ASan keeps up to 256 MiB of freed memory resident by default,
		# which would swamp what the flood itself costs.
		export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4"
		log "sanitizer build: ASAN_OPTIONS=$ASAN_OPTIONS"
	fi
	mkfifo "$WORK/nap.fifo" || die "cannot create $WORK/nap.fifo"
	exec {FLOOD_SLEEP_FD}<>"$WORK/nap.fifo"
}

# flood_topo_up: lib.sh's topology plus the flooder's namespace.
flood_topo_up() {
	topo_up
	ns_add "$NS_FL"
	veth "$NS_SW" p-fl "$NS_FL" eth0
	ip -n "$NS_SW" link set p-fl master br0
	ip -n "$NS_FL" addr add "$FL_OUTER/24" dev eth0
	ip -n "$NS_FL" route add "${SRV_OUTER%.*}.0/24" dev eth0 src "$FL_OUTER"
	nsx "$NS_FL" sysctl -qw net.ipv4.ip_forward=0
	ip -n "$NS_SRV" route add "$FL_NET" dev eth0 ||
		die "cannot route $FL_NET to the flooder"
	ip -n "$NS_SRV" route add "$SPOOF_NET" via "$FL_OUTER" dev eth0 ||
		die "cannot route $SPOOF_NET to the flooder"
	nsx "$NS_FL" nft -f - <<-EOF || die "cannot set up the reply counter"
	table inet flood {
		counter replies { }
		chain pre {
			type filter hook prerouting priority raw;
			ip saddr $SRV_OUTER udp sport 4433 counter name replies
		}
	}
	EOF
	wait_for 10 "the flooder reaches the server" \
		nsx "$NS_FL" ping -c 1 -W 1 "$SRV_OUTER" >/dev/null 2>&1 ||
		die "the flooder's link does not come up"
}

# The measuring loops below run while roved competes for two CPUs, and
# starting a process costs ~10 ms of CPU here: a poll that forks every
# 20 ms would take half a CPU away from roved and distort what it measures.
# So they use bash builtins only, and sleep on a FIFO that never delivers.
FLOOD_SLEEP_FD=

# nap SECONDS: sleep without starting a process.
nap() {
	read -r -t "$1" -u "$FLOOD_SLEEP_FD" _ || :
}

# now_ns: sets NOW (nanoseconds since the epoch, microsecond resolution).
now_ns() { NOW=${EPOCHREALTIME/./}000; }

# Each /proc file is read whole, in one read(2): bash's `read` takes a
# line in several, each of which the kernel answers from a fresh copy, and
# as the process's figures change length between them a line is torn (a
# field not found, a wrong number).
# cpu_ticks PID: sets TICKS to PID's user + system time in clock ticks
# (roved's command name has no spaces, so the fields split plainly).
cpu_ticks() {
	local s f
	{ s=$(<"/proc/$1/stat"); } 2>/dev/null || return 1
	read -r -a f <<<"$s"
	TICKS=$((f[13] + f[14]))
}

# proc_kb PID FIELD: sets KB to a VmXXX line of /proc/PID/status in kB.
proc_kb() {
	local s
	{ s=$(<"/proc/$1/status"); } 2>/dev/null || return 1
	[[ $s =~ (^|$'\n')$2:[[:space:]]*([0-9]+) ]] || return 1
	KB=${BASH_REMATCH[2]}
}

# file_has FILE TEXT: a line of FILE holds TEXT (after its timestamp).
file_has() {
	local line
	[ -e "$1" ] || return 1
	while IFS= read -r line; do
		[[ $line == *"$2"* ]] && return 0
	done <"$1"
	return 1
}

# wait_line FILE TEXT PID SECONDS: poll every 10 ms until a line of FILE
# starts with TEXT (returns 0), PID has exited or SECONDS have passed.
wait_line() {
	local i end
	now_ns
	end=$((NOW + $4 * 1000000000))
	for ((i = 0; i < $4 * 100; i++)); do
		file_has "$1" "$2" && return 0
		gone "$3" && break
		now_ns
		[ "$NOW" -lt "$end" ] || break
		nap 0.01
	done
	file_has "$1" "$2"
}

# udp_stat NS FIELD: a counter of the Udp: lines in /proc/net/snmp.
udp_stat() {
	# shellcheck disable=SC2016
	nsx "$1" awk -v f="$2" '$1 == "Udp:" && !n { for (i = 2; i <= NF; i++) h[i] = $i; n = 1; next }
		$1 == "Udp:" { for (i = 2; i <= NF; i++) if (h[i] == f) print $i }' /proc/net/snmp
}

# rss_sampler PID OUT STOP: the largest VmRSS of PID seen every 100 ms,
# written to OUT, until STOP exists, PID is gone or 60 s have passed.
rss_sampler() {
	local max=0 i
	for ((i = 0; i < 600; i++)); do
		[ -e "$3" ] && break
		proc_kb "$1" VmRSS 2>/dev/null || break
		[ "$KB" -gt "$max" ] && { max=$KB; echo "$max" >"$2"; }
		nap 0.1
	done
}

# replies: "PACKETS BYTES" that roved sent towards the flooder.
replies() {
	nsx "$NS_FL" nft list counter inet flood replies |
		sed -n 's/.*packets \([0-9]*\) bytes \([0-9]*\).*/\1 \2/p'
}

gone() { ! kill -0 "$1" 2>/dev/null; }

# flood_build COUNT: build COUNT Initials into $FLOOD_FILE in the
# background (it takes seconds; the topology can come up meanwhile). Every
# phase then sends from that file: each runs against a fresh roved, which
# cannot tell them from new ones.
flood_build() {
	FLOOD_FILE=$WORK/initials.bin
	"$FLOOD_TOOL" -n "$1" -t "$FLOOD_LIMIT_S" -o "$FLOOD_FILE" "$SRV_OUTER:4433" \
		>"$WORK/build.log" 2>&1 &
	FLOOD_BUILD_PID=$!
	E2E_PIDS+=("$FLOOD_BUILD_PID")
}

# flood_built: wait for flood_build; sets FLOOD_BUILD_S.
flood_built() {
	local i rc
	[ -n "${FLOOD_BUILD_PID:-}" ] || return 0
	for ((i = 0; i < (FLOOD_LIMIT_S + 5) * 10; i++)); do
		gone "$FLOOD_BUILD_PID" && break
		nap 0.1
	done
	wait "$FLOOD_BUILD_PID"
	rc=$?
	forget_pid "$FLOOD_BUILD_PID"
	FLOOD_BUILD_PID=
	[ "$rc" -eq 0 ] || { cat "$WORK/build.log"; die "quic-flood could not build the Initials"; }
	FLOOD_BUILD_S=$(grep '^{' "$WORK/build.log" | jget build_seconds)
	log "built the Initials in $FLOOD_BUILD_S s"
}

# flood_stop_all: end roved and the clients of the last phase.
flood_stop_all() {
	local p
	for p in ${BR_PID:-} ${LAP_PID:-} ${ROVED_PID:-}; do
		stop_pid "$p"
		forget_pid "$p"
	done
	BR_PID='' LAP_PID='' ROVED_PID=''
}

# flood_phase MODE COUNT: MODE one-source or spoofed. Starts roved and the
# laptop afresh and waits for the laptop's tunnel; then quic-flood sends
# COUNT Initials, the laptop pings roved's tunnel address every 20 ms from
# then on (FLOOD_PING_COUNT pings), and the branch (which has no ticket,
# so it needs a full handshake) runs rove up as soon as the last Initial
# is sent. Sets:
#   FLOOD_SENT FLOOD_PPS   what quic-flood reports
#   FLOOD_CPU_S       roved's CPU time from the start of the flood until it
#                     went quiet (under 20 ms of CPU in 200 ms), or
#                     FLOOD_QUIET_MAX_S after the start of the sending
#   FLOOD_BUSY_S      the seconds from the start of the sending until
#                     roved went quiet (-1: not within FLOOD_QUIET_MAX_S)
#   FLOOD_ABSORBED    Initials that reached roved's socket: those sent
#                     less FLOOD_RCVBUF_DROPS
#   FLOOD_PER_CPU_S   FLOOD_ABSORBED per CPU second of roved
#   FLOOD_ADMIT_MS    rove up of the branch to its tunnel up, connection
#                     established (-1: not within FLOOD_ADMIT_MAX_S)
#   FLOOD_IDLE_KB FLOOD_PEAK_KB   roved's VmRSS before, and its peak
#                     (VmHWM, or the 100-ms samples of VmRSS if higher)
#   FLOOD_PING_TX FLOOD_PING_RX FLOOD_PING_MAX_MS   the laptop's pings
#   FLOOD_PING_LATE   replies that took 1 s or longer
#   FLOOD_RCVBUF_DROPS  datagrams the server's kernel dropped at full
#                     socket buffers during the phase
#   FLOOD_REPLY_PKTS FLOOD_REPLY_BYTES  what roved sent the flooder
#   FLOOD_LAP_OK      1 if the laptop kept its connection (one handshake)
flood_phase() {
	local mode=$1 count=$2 args=() t0 t1 c0 c1 prev i json out
	local ping_pid flood_pid sampler_pid stop rss_out rcv0 rcv1 quiet end
	local flog=$WORK/flood-$mode-$count.log blog

	[ "$mode" = spoofed ] && args=(-S "$SPOOF_NET")
	now_ns
	local tp=$NOW
	flood_built
	flood_stop_all
	start_roved
	start_client laptop
	wait_established laptop || die "laptop's tunnel does not come up"
	wait_for 10 "a ping through the laptop's tunnel" \
		ping_ok "$NS_LAP" -c 1 "$SRV_TUN4" || die "no ping through the tunnel"
	nsx "$NS_FL" nft reset counter inet flood replies >/dev/null
	# No ticket: the branch needs a full handshake, as a new client does.
	rm -rf "$WORK/configs/state/branch"

	proc_kb "$ROVED_PID" VmRSS
	FLOOD_IDLE_KB=$KB
	stop=$WORK/sampler-$mode-$count.stop
	rss_out=$WORK/sampler-$mode-$count.kb
	echo "$FLOOD_IDLE_KB" >"$rss_out"
	rss_sampler "$ROVED_PID" "$rss_out" "$stop" &
	sampler_pid=$!
	E2E_PIDS+=("$sampler_pid")
	rcv0=$(udp_stat "$NS_SRV" RcvbufErrors)

	now_ns
	local tb=$NOW
	# roved idles while the Initials are built: its CPU time counts from
	# here, its wall-clock time from the start of the sending.
	cpu_ticks "$ROVED_PID"
	c0=$TICKS
	bg "flood-$mode-$count" "$NS_FL" "$FLOOD_TOOL" -n "$count" -i "$FLOOD_FILE" \
		-t "$FLOOD_LIMIT_S" "${args[@]}" "$SRV_OUTER:4433"
	flood_pid=$BG_PID
	# Building many Initials takes a while; the pings start with the
	# sending.
	wait_line "$flog" sending "$flood_pid" "$FLOOD_LIMIT_S" ||
		die "quic-flood did not start sending"
	now_ns
	t0=$NOW
	bg "ping-$mode-$count" "$NS_LAP" ping -n -i 0.02 -c "$FLOOD_PING_COUNT" "$SRV_TUN4"
	ping_pid=$BG_PID

	# Polled every 10 ms: sending takes only tens of ms. The branch starts
	# once the last Initial has left, so that its own is queued behind the
	# whole flood: the worst case for roved, and the same in every run
	# (started any earlier, it would land at a random place in the flood).
	wait_line "$flog" "sent " "$flood_pid" "$FLOOD_LIMIT_S" ||
		die "quic-flood did not send"

	# The admission of a configured client while roved is flooded: from
	# rove up until its tunnel is up (handshake done, server config
	# applied, TUN configured).
	start_client branch
	now_ns
	t1=$NOW
	blog=$WORK/branch.log
	FLOOD_ADMIT_MS=-1
	if wait_line "$blog" "rove: tunnel up" "$BR_PID" "$FLOOD_ADMIT_MAX_S"; then
		now_ns
		FLOOD_ADMIT_MS=$(((NOW - t1) / 1000000))
	fi
	now_ns
	local ta=$NOW
	if [ "$FLOOD_ADMIT_MS" -ge 0 ] &&
		! state_is "$NS_BR" "$BR_SOCK" 'peers[0].state' established; then
		log "the branch's tunnel is up but its connection is not established"
		FLOOD_ADMIT_MS=-1
	fi

	for ((i = 0; i < FLOOD_LIMIT_S * 10; i++)); do
		gone "$flood_pid" && break
		nap 0.1
	done
	stop_pid "$flood_pid"
	forget_pid "$flood_pid"
	json=$(grep '^{' "$flog")
	FLOOD_SENT=$(printf '%s' "$json" | jget sent)
	FLOOD_PPS=$(printf '%s' "$json" | jget pps)

	# roved is done with the flood once it idles: less than 20 ms of CPU
	# in 200 ms (the laptop's pings cost far less).
	FLOOD_BUSY_S=-1
	quiet=$((t0 + FLOOD_QUIET_MAX_S * 1000000000))
	cpu_ticks "$ROVED_PID"
	prev=$TICKS
	now_ns
	while [ "$NOW" -lt "$quiet" ]; do
		nap 0.2
		cpu_ticks "$ROVED_PID" || break
		now_ns
		if [ $(((TICKS - prev) * 1000 / CLK_TCK)) -lt 20 ]; then
			FLOOD_BUSY_S=$(((NOW - t0) / 100000000))
			FLOOD_BUSY_S=$((FLOOD_BUSY_S / 10)).$((FLOOD_BUSY_S % 10))
			break
		fi
		prev=$TICKS
	done
	cpu_ticks "$ROVED_PID"
	c1=$TICKS
	now_ns
	local tq=$NOW
	FLOOD_CPU_S=$(awk -v t=$((c1 - c0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }')
	rcv1=$(udp_stat "$NS_SRV" RcvbufErrors)
	FLOOD_RCVBUF_DROPS=$((rcv1 - rcv0))
	# What reached roved: the Initials sent, less what its kernel dropped
	# at the full socket (mostly theirs).
	FLOOD_ABSORBED=$((FLOOD_SENT - FLOOD_RCVBUF_DROPS))
	[ "$FLOOD_ABSORBED" -ge 0 ] || FLOOD_ABSORBED=0
	FLOOD_PER_CPU_S=$(awk -v n="$FLOOD_ABSORBED" -v t=$((c1 - c0)) -v hz="$CLK_TCK" \
		'BEGIN { if (t > 0) printf "%.0f", n * hz / t; else print "inf" }')

	# The last ping gets 2 s for its answer; then SIGINT makes ping
	# print its count, with the unanswered ones as lost.
	end=$((t0 + (FLOOD_PING_COUNT * 20 + 2000) * 1000000))
	for ((i = 0; i < FLOOD_PING_COUNT / 5 + 100; i++)); do
		gone "$ping_pid" && break
		now_ns
		[ "$NOW" -lt "$end" ] || break
		nap 0.1
	done
	kill -INT "$ping_pid" 2>/dev/null
	for ((i = 0; i < 20; i++)); do
		gone "$ping_pid" && break
		nap 0.1
	done
	stop_pid "$ping_pid"
	forget_pid "$ping_pid"
	now_ns
	local tw=$NOW
	out=$(cat "$WORK/ping-$mode-$count.log")
	FLOOD_PING_TX=$(printf '%s\n' "$out" | sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p')
	FLOOD_PING_RX=$(printf '%s\n' "$out" | sed -n 's/.* \([0-9]*\) received.*/\1/p')
	FLOOD_PING_MAX_MS=$(printf '%s\n' "$out" | sed -n 's|^rtt .* = [0-9.]*/[0-9.]*/\([0-9.]*\)/.*|\1|p')
	: "${FLOOD_PING_TX:=0}" "${FLOOD_PING_RX:=0}" "${FLOOD_PING_MAX_MS:=-}"
	FLOOD_PING_LATE=$(printf '%s\n' "$out" | awk -F 'time=' 'NF > 1 && $2 + 0 >= 1000 { n++ } END { print n + 0 }')

	touch "$stop"
	wait "$sampler_pid" 2>/dev/null
	forget_pid "$sampler_pid"
	FLOOD_PEAK_KB=$(cat "$rss_out")
	proc_kb "$ROVED_PID" VmHWM && [ "$KB" -gt "$FLOOD_PEAK_KB" ] && FLOOD_PEAK_KB=$KB
	read -r FLOOD_REPLY_PKTS FLOOD_REPLY_BYTES < <(replies)

	FLOOD_LAP_OK=0
	[ "$(srv_get 'peers[name=laptop].handshakes' 2>/dev/null)" = 1 ] &&
		[ "$(srv_get 'peers[name=laptop].state' 2>/dev/null)" = established ] &&
		FLOOD_LAP_OK=1
	# Each phase starts the branch afresh; keep its log.
	cp "$blog" "$WORK/branch-$mode-$count.log"
	now_ns
	log "$mode x $count: phase timing (s): restart $(((tb - tp) / 1000000000))," \
		"load $(((t0 - tb) / 1000000000)), admission wait $(((ta - t0) / 1000000000))," \
		"quiet wait $(((tq - ta) / 1000000000)), ping wait $(((tw - tq) / 1000000000))," \
		"rest $(((NOW - tw) / 1000000000))"

	log "$mode x $count: sent $FLOOD_SENT at $FLOOD_PPS/s;" \
		"roved CPU $FLOOD_CPU_S s (idle again after ${FLOOD_BUSY_S} s)," \
		"$FLOOD_ABSORBED absorbed, $FLOOD_PER_CPU_S per CPU s; admission ${FLOOD_ADMIT_MS} ms;" \
		"VmRSS idle $FLOOD_IDLE_KB kB, peak $FLOOD_PEAK_KB kB;" \
		"ping $FLOOD_PING_RX/$FLOOD_PING_TX, $FLOOD_PING_LATE late (>= 1 s), max ${FLOOD_PING_MAX_MS} ms;" \
		"server socket drops $FLOOD_RCVBUF_DROPS; replies to the flooder" \
		"$FLOOD_REPLY_PKTS packets, $FLOOD_REPLY_BYTES bytes; laptop kept its connection: $FLOOD_LAP_OK"
}
