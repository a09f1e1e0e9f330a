#!/usr/bin/env bash
# Handshake flood benchmark: what valid QUIC Initials from a client that
# never answers (tests/e2e/quic-flood) cost roved, and what they cost its
# users. For 5,000 and 50,000 Initials, from one source address and from
# random spoofed sources, each on a fresh roved:
#   sent/s         the flooder's rate (one sender, sendmmsg; it shares the
#                  two CPUs with roved, so it drops as roved gets busy)
#   CPU s          roved's CPU time until it idles again (< 20 ms of CPU
#                  in 200 ms), at most BENCH_FLOOD_QUIET s after the
#                  sending started ("+": it was still busy then)
#   absorbed       Initials that reached roved's socket (sent, less what
#                  the kernel dropped at the full socket: "sock drops")
#   per CPU s      Initials absorbed per CPU second of roved
#   peak RSS       roved's VmHWM (or the highest VmRSS sampled every
#                  100 ms), idle in brackets
#   admission      rove up of a configured client without a ticket, started
#                  when the last Initial has been sent, until its tunnel
#                  is up; "-" if not within BENCH_FLOOD_ADMIT s
#   ping           pings every 20 ms through an established tunnel from the
#                  start of the sending: lost, late (answered after 1 s or
#                  more), and the slowest answer
#   socket drops   datagrams the kernel dropped at roved's full socket
#
# usage: bench/flood.sh BUILD_DIR [COUNT...]   (default counts: 5000 50000)
# Topology: tests/e2e/flood-lib.sh. Runs for under two minutes while
# roved idles between floods; each phase is bounded (quic-flood -t,
# BENCH_FLOOD_ADMIT, BENCH_FLOOD_QUIET).
. "$(dirname "$0")/../tests/e2e/flood-lib.sh"
TEST_NAME=bench-flood
FLOOD_ADMIT_MAX_S=${BENCH_FLOOD_ADMIT:-10}
FLOOD_QUIET_MAX_S=${BENCH_FLOOD_QUIET:-10}
FLOOD_LIMIT_S=60
flood_init "$1"
shift
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(5000 50000)
max=0
for count in "${counts[@]}"; do
	[ "$count" -gt "$max" ] && max=$count
done
flood_build "$max"
flood_topo_up

rows=()
for count in "${counts[@]}"; do
	for mode in one-source spoofed; do
		flood_phase "$mode" "$count"
		kill -0 "$ROVED_PID" 2>/dev/null || die "roved died during the $mode flood"
		cpu=$FLOOD_CPU_S
		[ "$FLOOD_BUSY_S" = -1 ] && cpu="$cpu+"
		admit=-
		[ "$FLOOD_ADMIT_MS" -ge 0 ] && admit="$FLOOD_ADMIT_MS ms"
		rows+=("$(printf '%-10s %8s %7s %8s %7s %9s %16s %10s %17s %7s' "$mode" \
			"$FLOOD_SENT" "$FLOOD_PPS" "$FLOOD_ABSORBED" "$cpu" "$FLOOD_PER_CPU_S" \
			"$((FLOOD_PEAK_KB / 1024)) MB ($((FLOOD_IDLE_KB / 1024)))" "$admit" \
			"$((FLOOD_PING_TX - FLOOD_PING_RX))/$FLOOD_PING_LATE/${FLOOD_PING_MAX_MS%.*} ms" \
			"$FLOOD_RCVBUF_DROPS")")
	done
done
flood_stop_all

echo
echo "Handshake flood against roved ($(basename "$BUILD"); $(nproc) CPUs shared by flooder, roved and clients)"
printf '%-10s %8s %7s %8s %7s %9s %16s %10s %17s %7s\n' mode Initials sent/s absorbed \
	"CPU s" "per CPU s" "peak RSS (idle)" admission "ping lost/late/max" "sock drops"
for r in "${rows[@]}"; do
	printf '%s\n' "$r"
done
e2e_finish
