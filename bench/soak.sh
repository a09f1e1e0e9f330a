#!/usr/bin/env bash
# Soak: SOAK_MINUTES of mixed traffic and scheduled faults against one roved
# and two clients, with the memory and the open files of all three programs
# sampled every minute. What a short test cannot see (a session, socket,
# timer, buffer or ticket that each reconnect, rebinding or flood leaves
# behind) shows here as a series that keeps climbing.
#
# usage: bench/soak.sh BUILD_DIR          (root; `make soak` runs it on build/)
#   SOAK_MINUTES=N         length in minutes (default 30, at least 3)
#   SOAK_RATE=R            iperf3's rate, as its -b takes it (default 10M)
#   SOAK_FLOOD_EVERY=S     seconds between flood bursts (default 60)
#   SOAK_FLOOD_COUNT=N     Initials per burst (default 2000)
#   SOAK_REBIND_EVERY=S    seconds between NAT rebindings (default 90)
#   SOAK_RESTART_EVERY=S   seconds between restarts of the branch (default 180)
#   KEEP=1                 keep the work directory and its logs
#
#                        $NS_SW: bridge br0
#      +-----------------+-----------------+-----------------+
#      | p-srv           | p-nat           | p-br            | p-fl
#   198.18.1.1        198.18.1.2        198.18.1.3        198.19.200.9
#   $NS_SRV           $NS_NAT           $NS_BR            $NS_FL
#   roved             masquerade        rove (branch)     tests/e2e/quic-flood
#   eth1 198.19.10.1  random, out eth0
#      |              ra 198.18.2.1
#   $NS_LAN              |
#   198.19.10.2       $NS_LAP 198.18.2.2
#   iperf3 -s,        rove (laptop), LocalForward
#   echo server       127.0.0.1:7001 -> 198.19.10.2:7001
#
# The laptop sits behind a NAT, as in tests/e2e/roam-lib.sh, so that a
# conntrack flush there moves it to a new outer port. The flooder has its
# own prefix on the switch, and the spoofed sources ($SPOOF_NET) are routed
# back to its namespace, which does not forward: roved's answers end there,
# as in tests/e2e/flood-lib.sh.
#
# Traffic, all of it for the whole soak:
#  - iperf3 TCP at SOAK_RATE from the LAN host to the laptop through the IP
#    tunnel (run with -R from the laptop, so that the receiver prints each
#    second);
#  - the laptop's LocalForward: every 2 s, 4 connections to the echo server
#    behind it, each sending 64 KiB and checking the sha256 of the echo
#    (tests/e2e/fwd-peer.py many);
#  - pings every 0.2 s, the laptop to roved's tunnel address and the branch
#    through roved to the LAN host.
# Faults, on a schedule (seconds from the start):
#  - a flood burst every SOAK_FLOOD_EVERY s from 30 s: SOAK_FLOOD_COUNT
#    valid Initials at full rate, from one source and from spoofed sources
#    in turn;
#  - a NAT rebinding every SOAK_REBIND_EVERY s from 45 s (conntrack -F in
#    the NAT router): roved has to find the laptop on a new port;
#  - a restart of the branch's rove every SOAK_RESTART_EVERY s from 75 s
#    (SIGTERM, then rove up again, with 0-RTT). It is the branch that
#    restarts, not the laptop, because the laptop carries the traffic whose
#    continuity is checked; a restart would break that on purpose.
#
# Samples, at the start (minute 0) and at the end of every minute: VmRSS and
# the number of open file descriptors of roved, of the laptop's rove and of
# the branch's current rove; roved's CPU time in each minute.
#
# Verdict: a series is "flat" when its last sample is at most
# max(10%, 2048 kB) above its sample at minute 2 (file descriptors: at most
# 4 more), else it "grows". Minute 2 rather than 0: by then every kind of
# fault has happened once (two floods, a rebinding, a restart), so that the
# memory a first use sets up for good (heap arenas, TLS contexts, the ticket
# register, socket buffers) is in the baseline.
# The script exits 1 when a series grows or traffic stopped: an iperf3
# second in which the laptop received nothing, iperf3 ending early, a failed
# forward transfer, a minute in which a client got no ping answered, a
# branch that does not reconnect after its restart; and when a program does
# not exit 0 on SIGTERM at the end (or, in a sanitizer build, logs a report).
#
# Bounds: the schedule loop stops by itself at the end (and after a fixed
# number of rounds); every command it starts has a timeout; a watchdog ends
# the script 15 minutes after the planned end whatever happens.
. "$(dirname "$0")/../tests/e2e/fwd-lib.sh"
TEST_NAME=soak

SOAK_MINUTES=${SOAK_MINUTES:-30}
SOAK_RATE=${SOAK_RATE:-10M}
SOAK_FLOOD_EVERY=${SOAK_FLOOD_EVERY:-60}
SOAK_FLOOD_COUNT=${SOAK_FLOOD_COUNT:-2000}
SOAK_REBIND_EVERY=${SOAK_REBIND_EVERY:-90}
SOAK_RESTART_EVERY=${SOAK_RESTART_EVERY:-180}
for v in SOAK_MINUTES SOAK_FLOOD_EVERY SOAK_FLOOD_COUNT SOAK_REBIND_EVERY SOAK_RESTART_EVERY; do
	case ${!v} in
	'' | *[!0-9]* | 0) echo "$0: $v must be a positive whole number, not '${!v}'" >&2; exit 2 ;;
	esac
done
[ "$SOAK_MINUTES" -ge 3 ] || { echo "$0: SOAK_MINUTES must be at least 3 (minute 2 is the baseline)" >&2; exit 2; }
[[ $SOAK_RATE =~ ^[0-9]+(\.[0-9]+)?[KMG]?$ ]] || { echo "$0: SOAK_RATE must be a rate as iperf3 -b takes it, such as 10M" >&2; exit 2; }

fwd_init "$@"
for p in iperf3 conntrack nft ping timeout; do
	command -v "$p" >/dev/null || die "$p is not installed (scripts/deps.sh installs it)"
done
FLOOD_TOOL=$BUILD/tests/quic-flood
[ -x "$FLOOD_TOOL" ] || die "$FLOOD_TOOL is missing; run make $(basename "$BUILD")/tests/quic-flood"

DUR=$((SOAK_MINUTES * 60))
NS_NAT=rove-$$-nat
NS_FL=rove-$$-fl
NAT_OUT=$LAP_OUTER          # the NAT takes the laptop's place on the switch
NAT_IN=198.18.2.1
LAP_IN=198.18.2.2
FL_OUTER=198.19.200.9
FL_NET=198.19.200.0/24
SPOOF_NET=198.19.128.0/18
XFER_PORT=7001
IPERF_PORT=5201
PING_GAP=0.2
XFER_CONNS=4
XFER_SIZE=64K
XFER_PAUSE=2

EVENTS=$WORK/events.txt     # "EPOCH KIND DETAIL..." of every fault
SAMPLES=$WORK/samples.txt   # one line per minute, see sample()
: >"$EVENTS"
: >"$SAMPLES"

# The watchdog: if anything wedges despite its own bounds, the script still
# ends (its TERM trap cleans up) 15 minutes after the planned end.
(
	trap 'kill -TERM "$s" 2>/dev/null; exit 0' TERM
	sleep $((DUR + 900)) &
	s=$!
	wait "$s" && kill -TERM $$ 2>/dev/null
) &
E2E_PIDS+=("$!")

soak_topo_up() {
	local ns p
	for ns in "$NS_SW" "$NS_SRV" "$NS_LAN" "$NS_NAT" "$NS_LAP" "$NS_BR" "$NS_FL"; do
		ns_add "$ns"
	done
	ip -n "$NS_SW" link add br0 type bridge || die "cannot create the bridge"
	ip -n "$NS_SW" link set br0 up
	veth "$NS_SW" p-srv "$NS_SRV" eth0
	veth "$NS_SW" p-nat "$NS_NAT" eth0
	veth "$NS_SW" p-br "$NS_BR" eth0
	veth "$NS_SW" p-fl "$NS_FL" eth0
	for p in p-srv p-nat p-br p-fl; do
		ip -n "$NS_SW" link set "$p" master br0
	done
	ip -n "$NS_SRV" addr add "$SRV_OUTER/24" dev eth0
	ip -n "$NS_NAT" addr add "$NAT_OUT/24" dev eth0
	ip -n "$NS_BR" addr add "$BR_OUTER/24" dev eth0
	ip -n "$NS_FL" addr add "$FL_OUTER/24" dev eth0

	veth "$NS_SRV" eth1 "$NS_LAN" eth0
	ip -n "$NS_SRV" addr add "$SRV_LAN/24" dev eth1
	ip -n "$NS_LAN" addr add "$LAN_HOST/24" dev eth0
	ip -n "$NS_LAN" route add default via "$SRV_LAN"
	nsx "$NS_SRV" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1

	veth "$NS_NAT" ra "$NS_LAP" eth0
	ip -n "$NS_NAT" addr add "$NAT_IN/24" dev ra
	ip -n "$NS_LAP" addr add "$LAP_IN/24" dev eth0
	ip -n "$NS_LAP" route add default via "$NAT_IN"
	nsx "$NS_NAT" sysctl -qw net.ipv4.ip_forward=1
	# random: a new mapping after a flush gets a new port, not the old one
	# again, so that every flush is a rebinding roved has to follow.
	nsx "$NS_NAT" nft -f - <<-EOF || die "cannot load the NAT's nftables rules"
	table ip soak {
		chain post {
			type nat hook postrouting priority srcnat; policy accept;
			oifname "eth0" masquerade random
		}
	}
	EOF

	ip -n "$NS_FL" route add "${SRV_OUTER%.*}.0/24" dev eth0 src "$FL_OUTER"
	nsx "$NS_FL" sysctl -qw net.ipv4.ip_forward=0
	ip -n "$NS_SRV" route add "$FL_NET" dev eth0 || die "cannot route $FL_NET to the flooder"
	ip -n "$NS_SRV" route add "$SPOOF_NET" via "$FL_OUTER" dev eth0 ||
		die "cannot route $SPOOF_NET to the flooder"

	wait_for 10 "the outer network" soak_outer_ready || die "the outer network does not come up"
}

soak_outer_ready() {
	local ns
	for ns in "$NS_LAP" "$NS_BR" "$NS_FL"; do
		nsx "$ns" ping -c 1 -W 1 "$SRV_OUTER" >/dev/null 2>&1 || return 1
	done
	nsx "$NS_SRV" ping -c 1 -W 1 "$LAN_HOST" >/dev/null 2>&1
}

tunnel_pings() {
	nsx "$NS_LAP" ping -c 1 -W 1 "$SRV_TUN4" >/dev/null 2>&1 &&
		nsx "$NS_BR" ping -c 1 -W 1 "$LAN_HOST" >/dev/null 2>&1
}

# event KIND DETAIL...: one line of the fault log.
event() {
	printf '%s %s\n' "$EPOCHSECONDS" "$*" >>"$EVENTS"
	log "$((EPOCHSECONDS - T0)) s: $*"
}

# child_run COMMAND...: COMMAND as a child that a TERM to the calling loop
# ends too, so that stopping a loop leaves nothing of it behind.
CHILD=
child_run() {
	"$@" &
	CHILD=$!
	wait "$CHILD"
	local rc=$?
	CHILD=
	return $rc
}
loop_trap() { trap '[ -n "$CHILD" ] && kill -TERM "$CHILD" 2>/dev/null; exit 0' TERM; }

# ping_loop NS DEST: rounds of 25 pings (5 s) until the end, one line per
# round: "START END SENT RECEIVED". Short rounds, so that the answers can be
# put in the right minute, and so that a ping that gives up (the branch's
# route is gone while it restarts) is soon replaced.
ping_loop() {
	local ns=$1 dest=$2 i s out tx rx
	loop_trap
	for ((i = 0; i < DUR / 4 + 10; i++)); do
		[ "$EPOCHSECONDS" -lt "$END" ] || break
		s=$EPOCHSECONDS
		child_run nsx "$ns" ping -n -q -c 25 -i "$PING_GAP" -W 1 -w 8 "$dest" >"$WORK/ping-$ns.tmp" 2>&1
		out=$(<"$WORK/ping-$ns.tmp")
		tx=$(sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p' <<<"$out")
		rx=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' <<<"$out")
		echo "$s $EPOCHSECONDS ${tx:-0} ${rx:-0}"
		[ "${tx:-0}" -gt 0 ] || sleep 1
	done
}

# xfer_loop: forward transfers until the end, one line each:
# "START END EXIT_STATUS JSON" (the JSON of fwd-peer.py many, or nothing).
xfer_loop() {
	local i s rc
	loop_trap
	for ((i = 0; i < DUR / XFER_PAUSE + 10; i++)); do
		[ "$EPOCHSECONDS" -lt "$END" ] || break
		s=$EPOCHSECONDS
		child_run nsx "$NS_LAP" timeout -k 5 30 "$PY" "$FWD_PEER" many \
			"127.0.0.1:$XFER_PORT" --conns "$XFER_CONNS" --size "$XFER_SIZE" \
			--timeout 25 >"$WORK/xfer.tmp" 2>&1
		rc=$?
		echo "$s $EPOCHSECONDS $rc $(grep '^{' "$WORK/xfer.tmp" | tail -n 1)"
		sleep "$XFER_PAUSE"
	done
}

# wait_done PID SECONDS: wait for a background process to end by itself;
# its exit status, or 124 when it overstays (it is then killed).
wait_done() {
	local pid=$1 i rc
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		forget_pid "$pid"
		return 124
	fi
	wait "$pid"
	rc=$?
	forget_pid "$pid"
	return $rc
}

# Samples: VmRSS in kB, the number of open fds, CPU ticks; "-" for a
# process that is gone. Each /proc file is read whole, in one read(2):
# bash's `read` takes a line in several, which the kernel answers from
# fresh copies, and a line whose figures changed between them is torn.
rss_of() {
	local s
	{ s=$(<"/proc/$1/status"); } 2>/dev/null || { echo -; return; }
	[[ $s =~ (^|$'\n')VmRSS:[[:space:]]*([0-9]+) ]] || { echo -; return; }
	echo "${BASH_REMATCH[2]}"
}
fds_of() {
	[ -d "/proc/$1/fd" ] || { echo -; return; }
	local f=("/proc/$1/fd/"*)
	[ -e "${f[0]}" ] || [ -L "${f[0]}" ] || { echo 0; return; }
	echo "${#f[@]}"
}
ticks_of() {
	local s f
	{ s=$(<"/proc/$1/stat"); } 2>/dev/null || { echo -; return; }
	read -r -a f <<<"$s"
	echo $((f[13] + f[14]))
}

# rcvbuf_drops NS: datagrams the kernel dropped at full UDP receive buffers
# in NS so far (RcvbufErrors of /proc/net/snmp, which is per namespace).
rcvbuf_drops() {
	# shellcheck disable=SC2016
	nsx "$1" awk '$1 == "Udp:" && !n { for (i = 2; i <= NF; i++) h[i] = $i; n = 1; next }
		$1 == "Udp:" { for (i = 2; i <= NF; i++) if (h[i] == "RcvbufErrors") print $i }' \
		/proc/net/snmp 2>/dev/null || echo -
}

# sample MINUTE: "MINUTE EPOCH ROVED_RSS ROVED_FDS ROVED_TICKS LAP_PID
# LAP_RSS LAP_FDS BR_PID BR_RSS BR_FDS LOST DROPS_LAP DROPS_SRV", LOST being
# the datagrams roved has counted lost toward the laptop: with the drops,
# what tells a loaded machine from a tunnel that loses packets.
sample() {
	local line lost
	line="$1 $EPOCHSECONDS $(rss_of "$ROVED_PID") $(fds_of "$ROVED_PID") $(ticks_of "$ROVED_PID")"
	line+=" $LAP_PID $(rss_of "$LAP_PID") $(fds_of "$LAP_PID")"
	line+=" $BR_PID $(rss_of "$BR_PID") $(fds_of "$BR_PID")"
	lost=$(status "$NS_SRV" "$ROVED_SOCK" 2>/dev/null | jget 'peers[name=laptop].datagrams_lost' 2>/dev/null)
	line+=" ${lost:--} $(rcvbuf_drops "$NS_LAP") $(rcvbuf_drops "$NS_SRV")"
	echo "$line" >>"$SAMPLES"
	log "minute $1: $line"
}

FLOODS=0
FLOOD_PID=
flood_start() {
	local mode=one-source args=()
	if [ -n "$FLOOD_PID" ]; then
		event flood "skipped: the previous burst still runs"
		return
	fi
	FLOODS=$((FLOODS + 1))
	[ $((FLOODS % 2)) = 0 ] && mode=spoofed
	[ "$mode" = spoofed ] && args=(-S "$SPOOF_NET")
	bg "flood-$FLOODS" "$NS_FL" "$FLOOD_TOOL" -n "$SOAK_FLOOD_COUNT" -t 20 \
		"${args[@]}" "$SRV_OUTER:4433"
	FLOOD_PID=$BG_PID
	FLOOD_MODE=$mode
}

# flood_reap [SECONDS]: once the burst has ended, log what it sent.
flood_reap() {
	[ -n "$FLOOD_PID" ] || return 0
	if [ "${1:-0}" = 0 ]; then
		kill -0 "$FLOOD_PID" 2>/dev/null && return 0
	fi
	wait_done "$FLOOD_PID" "${1:-1}"
	local sent
	sent=$(grep '^{' "$WORK/flood-$FLOODS.log" | jget sent 2>/dev/null)
	event flood "$FLOOD_MODE ${sent:-?} sent"
	FLOOD_PID=
}

REBINDS=0
rebind() {
	if nsx "$NS_NAT" conntrack -F >/dev/null 2>&1; then
		REBINDS=$((REBINDS + 1))
		event rebind "NAT mappings flushed"
	else
		event rebind "conntrack -F failed"
	fi
}

# sanitizer_check LOG WHAT
sanitizer_check() {
	if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$1" 2>/dev/null; then
		fail "$2: sanitizer report in its log"
		grep -E -A5 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$1" | head -n 30
	fi
}

RESTARTS=0
RESTART_FAILED=0
restart_branch() {
	local rc=0 t1 ms
	RESTARTS=$((RESTARTS + 1))
	stop_pid "$BR_PID" || rc=$?
	forget_pid "$BR_PID"
	[ "$rc" = 0 ] || fail "the branch's rove exited with status $rc on SIGTERM (restart $RESTARTS)"
	mv "$WORK/branch.log" "$WORK/branch-$RESTARTS.log"
	sanitizer_check "$WORK/branch-$RESTARTS.log" "branch (run $RESTARTS)"
	t1=${EPOCHREALTIME/./}
	start_client branch
	if wait_established branch; then
		ms=$(((${EPOCHREALTIME/./} - t1) / 1000))
		event restart "branch up again within $ms ms (pid $BR_PID)"
	else
		RESTART_FAILED=$((RESTART_FAILED + 1))
		event restart "branch did not reconnect (pid $BR_PID)"
	fi
}

# ---- setup
soak_topo_up
peer_set laptop AllowForward "198.19.10.0/24:$XFER_PORT"
client_add "$WORK/configs/rove.conf" "LocalForward = 127.0.0.1:$XFER_PORT = $LAN_HOST:$XFER_PORT"
start_roved
start_client laptop
start_client branch
wait_established laptop || die "the laptop's tunnel does not come up"
wait_established branch || die "the branch's tunnel does not come up"
wait_for 15 "pings through both tunnels" tunnel_pings || die "no ping through the tunnels"
bg echo "$NS_LAN" timeout $((DUR + 300)) "$PY" "$FWD_PEER" serve "$LAN_HOST:$XFER_PORT" \
	--echo --timeout 60
ECHO_PID=$BG_PID
bg iperf3-server "$NS_LAN" timeout $((DUR + 300)) iperf3 -s -p "$IPERF_PORT"
IPERF_SRV_PID=$BG_PID
wait_listen "$NS_LAN" "$XFER_PORT" "the echo server"
wait_listen "$NS_LAP" "$XFER_PORT" "rove's LocalForward"
wait_listen "$NS_LAN" "$IPERF_PORT" "iperf3"

# ---- the soak
T0=$EPOCHSECONDS
END=$((T0 + DUR))
log "soak of $SOAK_MINUTES min: iperf3 at $SOAK_RATE, forwards every ${XFER_PAUSE} s," \
	"a flood of $SOAK_FLOOD_COUNT every $SOAK_FLOOD_EVERY s, a rebinding every" \
	"$SOAK_REBIND_EVERY s, a branch restart every $SOAK_RESTART_EVERY s"
IPERF_T0=$EPOCHREALTIME
bg iperf3 "$NS_LAP" timeout -k 5 $((DUR + 30)) iperf3 -c "$LAN_HOST" -p "$IPERF_PORT" \
	-R -b "$SOAK_RATE" -t "$DUR" -i 1 --forceflush --connect-timeout 5000
IPERF_PID=$BG_PID
ping_loop "$NS_LAP" "$SRV_TUN4" >"$WORK/ping-laptop.txt" 2>&1 &
PING_LAP_PID=$!
E2E_PIDS+=("$PING_LAP_PID")
ping_loop "$NS_BR" "$LAN_HOST" >"$WORK/ping-branch.txt" 2>&1 &
PING_BR_PID=$!
E2E_PIDS+=("$PING_BR_PID")
xfer_loop >"$WORK/xfer.txt" 2>&1 &
XFER_PID=$!
E2E_PIDS+=("$XFER_PID")

sample 0
next_sample=60
next_flood=30
next_rebind=45
next_restart=75
for ((round = 0; round < DUR * 2 + 200; round++)); do
	t=$((EPOCHSECONDS - T0))
	# A sample that a slow restart made late is still taken, late.
	if [ "$t" -ge "$next_sample" ] && [ "$next_sample" -le "$DUR" ]; then
		sample $((next_sample / 60))
		next_sample=$((next_sample + 60))
	fi
	[ "$next_sample" -le "$DUR" ] || break
	flood_reap
	if [ "$t" -ge "$next_flood" ] && [ "$t" -lt "$DUR" ]; then
		flood_start
		next_flood=$((next_flood + SOAK_FLOOD_EVERY))
	fi
	if [ "$t" -ge "$next_rebind" ] && [ "$t" -lt "$DUR" ]; then
		rebind
		next_rebind=$((next_rebind + SOAK_REBIND_EVERY))
	fi
	if [ "$t" -ge "$next_restart" ] && [ "$t" -lt "$DUR" ]; then
		restart_branch
		next_restart=$((next_restart + SOAK_RESTART_EVERY))
	fi
	sleep 0.5
done
[ "$next_sample" -gt "$DUR" ] || die "the schedule loop ended before the last sample"

# ---- wind down: every loop and run stops by itself shortly after the end
flood_reap 25
iperf_rc=0
wait_done "$IPERF_PID" 60 || iperf_rc=$?
for p in "$PING_LAP_PID" "$PING_BR_PID" "$XFER_PID"; do
	wait_done "$p" 45 || log "a traffic loop (pid $p) ended with status $?"
done
st_s=$(status "$NS_SRV" "$ROVED_SOCK" 2>/dev/null)
st_l=$(status "$NS_LAP" "$LAP_SOCK" 2>/dev/null)
LAP_HS=$(jget 'peers[0].handshakes' <<<"$st_l" 2>/dev/null)
LAP_RECONN=$(jget 'peers[0].reconnects' <<<"$st_l" 2>/dev/null)
SRV_REBINDS=$(jget 'peers[name=laptop].rebinds' <<<"$st_s" 2>/dev/null)
SRV_PV_FAIL=$(jget 'peers[name=laptop].path_validation_failures' <<<"$st_s" 2>/dev/null)
SRV_BR_HS=$(jget 'peers[name=branch].handshakes' <<<"$st_s" 2>/dev/null)
SRV_LAP_LOST=$(jget 'peers[name=laptop].datagrams_lost' <<<"$st_s" 2>/dev/null)
LAP_FWD=$("$PY" -c '
import json, sys
c = json.load(sys.stdin)["peers"][0]["forward_counters"]
print(" ".join("%s %d" % (k, v) for k, v in c.items() if v))' <<<"$st_l" 2>/dev/null)
# Packets the kernel could not queue to a TUN device (the program behind it
# did not read fast enough) are the other place a TCP segment can be lost.
TUN_DROPS=
for ns in "$NS_SRV" "$NS_LAP"; do
	TUN_DROPS+=" $(nsx "$ns" cat /sys/class/net/rove0/statistics/tx_dropped 2>/dev/null || echo -)"
done
SRV_DROPS=$(jget drops <<<"$st_s" 2>/dev/null)
IPERF_RETR=$(sed -n 's/.* \([0-9][0-9]*\) *sender$/\1/p' "$WORK/iperf3.log" | tail -n 1)
for p in "$IPERF_SRV_PID" "$ECHO_PID"; do
	stop_pid "$p"
	forget_pid "$p"
done
stop_checked "$LAP_PID" laptop
stop_checked "$BR_PID" branch
stop_checked "$ROVED_PID" roved

# ---- report
echo
echo "soak: $SOAK_MINUTES min on $(basename "$BUILD"), $(nproc) CPUs shared with whatever else runs;" \
	"iperf3 TCP at $SOAK_RATE LAN host -> laptop, $XFER_CONNS x $XFER_SIZE echoed through the" \
	"laptop's LocalForward every ${XFER_PAUSE} s, pings every ${PING_GAP} s from both clients"
echo "faults: $FLOODS flood bursts of $SOAK_FLOOD_COUNT Initials (one source and spoofed in turn)," \
	"$REBINDS NAT rebindings of the laptop, $RESTARTS restarts of the branch"
echo "roved: laptop rebinds seen ${SRV_REBINDS:-?} (path validation failures ${SRV_PV_FAIL:-?})," \
	"branch handshakes ${SRV_BR_HS:-?}, laptop datagrams lost ${SRV_LAP_LOST:-?};" \
	"laptop: handshakes ${LAP_HS:-?}, reconnects ${LAP_RECONN:-?}"
echo "laptop's forward counters: ${LAP_FWD:-?}; iperf3 sender's retransmissions: ${IPERF_RETR:-?}"
read -r d_srv d_lap <<<"$TUN_DROPS"
echo "TUN tx_dropped: roved's rove0 $d_srv, the laptop's rove0 $d_lap; roved's drops: ${SRV_DROPS:-?}"
"$PY" - "$SAMPLES" "$EVENTS" "$WORK/iperf3.log" "$IPERF_T0" "$iperf_rc" \
	"$WORK/xfer.txt" "$WORK/ping-laptop.txt" "$WORK/ping-branch.txt" \
	"$T0" "$SOAK_MINUTES" "$RESTART_FAILED" "$(getconf CLK_TCK)" <<-'EOF'
	import json, re, sys
	(samples_f, events_f, iperf_f, iperf_t0, iperf_rc, xfer_f, pl_f, pb_f,
	 t0, minutes, restart_failed, hz) = sys.argv[1:]
	t0 = int(t0); minutes = int(minutes); hz = int(hz)
	iperf_t0 = float(iperf_t0); dur = minutes * 60

	def minute_of(epoch):
	    # An event at second s of the soak belongs to minute s // 60 + 1,
	    # whose end is sampled as "minute k".
	    return min(max(int((epoch - t0) // 60) + 1, 1), minutes)

	def num(x):
	    return None if x == '-' else int(x)

	samples = {}
	for line in open(samples_f):
	    f = line.split()
	    samples[int(f[0])] = {
	        'at': int(f[1]) - t0, 'roved_rss': num(f[2]), 'roved_fds': num(f[3]), 'roved_ticks': num(f[4]),
	        'lap_pid': f[5], 'lap_rss': num(f[6]), 'lap_fds': num(f[7]),
	        'br_pid': f[8], 'br_rss': num(f[9]), 'br_fds': num(f[10]),
	        'lost': num(f[11]), 'drops': [num(f[12]), num(f[13])]}

	events = {k: [] for k in range(1, minutes + 1)}
	for line in open(events_f):
	    ep, kind, detail = line.rstrip('\n').split(' ', 2)
	    if kind == 'flood':
	        d = detail.replace(' sent', '')
	    elif kind == 'rebind':
	        d = 'rebind' if 'flushed' in detail else 'rebind FAILED'
	    elif kind == 'restart':
	        m = re.search(r'within (\d+) ms', detail)
	        d = 'restart %s ms' % m.group(1) if m else 'restart FAILED'
	    else:
	        d = kind
	    events[minute_of(int(ep))].append(d)

	# iperf3 -R: the client's interval lines are what it received.
	unit = {'Bytes': 1, 'KBytes': 1024, 'MBytes': 1024 ** 2, 'GBytes': 1024 ** 3}
	ipf = {k: [0, 0, 0] for k in range(1, minutes + 1)}  # bytes, seconds, zero seconds
	zero_at = []
	last_end = 0.0
	rx = re.compile(r'^\[\s*\d+\]\s+([\d.]+)-([\d.]+)\s+sec\s+([\d.]+)\s+(\w+)\s+[\d.]+\s+\w+/sec\s*$')
	try:
	    lines = open(iperf_f, errors='replace').read().splitlines()
	except OSError:
	    lines = []
	for line in lines:
	    m = rx.match(line)
	    if not m:
	        continue
	    a, b = float(m.group(1)), float(m.group(2))
	    n = float(m.group(3)) * unit.get(m.group(4), 1)
	    last_end = max(last_end, b)
	    k = minute_of(iperf_t0 + a)
	    ipf[k][0] += n
	    ipf[k][1] += b - a
	    # A short tail (the run's last fraction of a second) is not a second
	    # without data.
	    if n == 0 and b - a >= 0.5:
	        ipf[k][2] += 1
	        zero_at.append(int(iperf_t0 + a - t0))

	xf = {k: [0, 0] for k in range(1, minutes + 1)}  # ok, runs
	xfer_bad = []
	for line in open(xfer_f):
	    f = line.rstrip('\n').split(' ', 3)
	    if len(f) < 3:
	        continue
	    k = minute_of(int(f[0]))
	    good = False
	    try:
	        r = json.loads(f[3]) if len(f) > 3 and f[3] else None
	        good = f[2] == '0' and r is not None and r['ok'] == r['conns']
	    except ValueError:
	        r = None
	    xf[k][1] += 1
	    if good:
	        xf[k][0] += 1
	    else:
	        xfer_bad.append('%d s: exit %s %s' % (int(f[0]) - t0, f[2],
	                        (r or {}).get('bad', 'no result')))

	def pings(fn):
	    p = {k: [0, 0] for k in range(1, minutes + 1)}  # received, sent
	    for line in open(fn):
	        s, e, tx, rxn = map(int, line.split())
	        k = minute_of((s + e) / 2)
	        p[k][0] += rxn
	        p[k][1] += tx
	    return p
	pl, pb = pings(pl_f), pings(pb_f)

	def cell(v):
	    return '-' if v is None else str(v)

	print()
	print('memory and open files (VmRSS kB / fds; * = the branch was restarted since the last sample)')
	print('%6s %7s %12s %6s %13s %6s %13s %6s' % ('minute', 'at s', 'roved RSS', 'fds',
	      'laptop RSS', 'fds', 'branch RSS', 'fds'))
	prev_br = None
	for k in sorted(samples):
	    s = samples[k]
	    mark = '*' if prev_br is not None and s['br_pid'] != prev_br else ' '
	    prev_br = s['br_pid']
	    print('%6d %7d %12s %6s %13s %6s %12s%s %6s' % (k, s['at'], cell(s['roved_rss']),
	          cell(s['roved_fds']), cell(s['lap_rss']), cell(s['lap_fds']),
	          cell(s['br_rss']), mark, cell(s['br_fds'])))

	print()
	print('traffic and faults per minute (lost: datagrams roved counted lost toward the laptop;'
	      ' sock drops: UDP receive-buffer overflows in the laptop\'s and the server\'s namespace)')
	print('%6s %7s %8s %6s %6s %9s %9s %11s %11s  %s' % ('minute', 'roved', 'iperf3', '0-byte',
	      'lost', 'sock', 'forwards', 'laptop ping', 'branch ping', 'faults'))
	print('%6s %7s %8s %6s %6s %9s %9s %11s %11s' % ('', 'CPU s', 'Mbit/s', 's', 'to lap',
	      'drops l/s', 'ok/runs', 'rx/tx', 'rx/tx'))

	def delta(a, b):
	    return '-' if a is None or b is None else str(b - a)
	stopped = []
	for k in range(1, minutes + 1):
	    a, b = samples.get(k - 1), samples.get(k)
	    cpu = lost = drops = '-'
	    if a and b:
	        if a['roved_ticks'] is not None and b['roved_ticks'] is not None:
	            cpu = '%.2f' % ((b['roved_ticks'] - a['roved_ticks']) / hz)
	        lost = delta(a['lost'], b['lost'])
	        drops = '%s/%s' % (delta(a['drops'][0], b['drops'][0]),
	                           delta(a['drops'][1], b['drops'][1]))
	    byt, secs, zero = ipf[k]
	    mbit = '%.1f' % (byt * 8 / secs / 1e6) if secs > 0 else '-'
	    print('%6d %7s %8s %6d %6s %9s %9s %11s %11s  %s' % (k, cpu, mbit, zero, lost, drops,
	          '%d/%d' % tuple(xf[k]), '%d/%d' % tuple(pl[k]), '%d/%d' % tuple(pb[k]),
	          ', '.join(events[k]) or '-'))
	    for who, p in (('laptop', pl), ('branch', pb)):
	        if p[k][0] == 0:
	            stopped.append('minute %d: no ping of the %s answered' % (k, who))

	if zero_at:
	    stopped.append('iperf3: %d second(s) without a byte, at %s s' % (
	        len(zero_at), ', '.join(map(str, zero_at[:20]))))
	if last_end < dur - 2:
	    stopped.append('iperf3 received until %.0f s of %d (exit status %s)' % (last_end, dur, iperf_rc))
	elif iperf_rc != '0':
	    stopped.append('iperf3 exited with status %s' % iperf_rc)
	if xfer_bad:
	    stopped.append('forwards: %d transfer(s) failed: %s' % (len(xfer_bad), '; '.join(xfer_bad[:5])))
	if sum(r for _, r in xf.values()) == 0:
	    stopped.append('forwards: no transfer ran')
	if restart_failed != '0':
	    stopped.append('the branch did not reconnect after %s restart(s)' % restart_failed)

	print()
	print('verdict, last sample (minute %d) against minute 2: VmRSS flat within '
	      '+max(10%%, 2048 kB), fds within +4' % minutes)
	grows = []
	last = samples.get(minutes)
	base = samples.get(2)
	for key, name, kind in (('roved_rss', 'roved VmRSS', 'kB'), ('roved_fds', 'roved fds', 'fd'),
	                        ('lap_rss', 'laptop VmRSS', 'kB'), ('lap_fds', 'laptop fds', 'fd'),
	                        ('br_rss', 'branch VmRSS', 'kB'), ('br_fds', 'branch fds', 'fd')):
	    b = base and base[key]
	    l = last and last[key]
	    if b is None or l is None:
	        print('  %-13s no sample (minute 2: %s, minute %d: %s): grows' % (name, b, minutes, l))
	        grows.append(name)
	        continue
	    tol = max(b // 10, 2048) if kind == 'kB' else 4
	    ok = l - b <= tol
	    pct = ', %+.1f%%' % (100.0 * (l - b) / b) if kind == 'kB' and b else ''
	    print('  %-13s %8d -> %8d %s (%+d%s; tolerance +%d): %s' % (name, b, l, kind, l - b, pct,
	          tol, 'flat' if ok else 'grows'))
	    if not ok:
	        grows.append(name)
	if stopped:
	    print('  traffic: stopped')
	    for s in stopped:
	        print('    ' + s)
	else:
	    print('  traffic: flowed throughout (no iperf3 second without a byte, every forward '
	          'transfer echoed, pings answered in every minute)')
	print('verdict: %s%s' % ('grows (%s)' % ', '.join(grows) if grows else 'flat',
	      '; traffic stopped' if stopped else ''))
	sys.exit(1 if grows or stopped else 0)
	EOF
rc=$?
[ "$rc" = 0 ] || fail "the soak's verdict (above)"
e2e_finish
