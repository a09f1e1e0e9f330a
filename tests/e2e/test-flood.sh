#!/usr/bin/env bash
# A handshake flood: 5,000 valid QUIC Initials at full rate from a client
# that never answers (tests/e2e/quic-flood), first from one source address
# and port, then, on a fresh roved, from random sources in 198.19.128.0/18,
# then 50,000 from one source: ten times what roved can take in while they
# arrive, so they queue at (or overflow) its handshake socket. The established connections'
# socket is another one (roved steers long headers to a socket of their
# own), and so no ping may be lost even then.
# While each flood lands, the laptop pings roved's tunnel address every
# 20 ms; the branch, a configured peer without a ticket, runs rove up as
# soon as the last Initial has been sent, so that its Initial waits behind
# all of them. Each time:
#  - the branch's tunnel is up, its connection established, within 2 s of
#    rove up starting;
#  - no ping through the laptop's tunnel is lost, and the laptop keeps its
#    connection. Pings are counted until 2 s after the last one is sent (or
#    until the admission and idle waits have ended, if later); those
#    answered 1 s late or later are shown, since a stalled tunnel loses
#    nothing yet serves nobody, but they depend on how busy the host is;
#  - roved's peak resident memory (VmHWM, and VmRSS sampled every 100 ms)
#    stays under 64 MiB.
# A sanitizer build runs roved and rove about 2.5 times slower (roved's CPU
# time for the same flood: 0.54 s against 0.21), so the branch has 4 s.
# And it bounds roved's memory growth over its idle VmRSS instead: by
# 64 MiB less the idle VmRSS of a plain build (FLOOD_PLAIN_IDLE_KB), times
# 2. ASan's own idle footprint (shadow and allocator regions: 16 MiB
# against 8) says nothing about roved, and it pads every allocation with
# redzones and shadows it, so the same heap weighs more: the same flood
# grew a roved that made a session of every Initial by 318 MiB in a plain
# build and by 452 MiB under ASan (x 1.42). ASan's quarantine, which would
# keep up to 256 MiB of freed memory resident, is capped at 4 MiB.
# The figures are printed: Initials/s sent, roved's CPU seconds until it
# idles again, Initials per CPU second, admission time, peak RSS, pings.
# Topology: tests/e2e/flood-lib.sh.
. "$(dirname "$0")/flood-lib.sh"
flood_init "$@"
BIG=50000
flood_build "$BIG"
flood_topo_up

ADMIT_MS=2000
[ "$FLOOD_ASAN" = 1 ] && ADMIT_MS=4000
LIMIT_KB=$((64 * 1024))
# roved's idle VmRSS in a plain build, laptop connected (measured: ~9 MiB).
FLOOD_PLAIN_IDLE_KB=${FLOOD_PLAIN_IDLE_KB:-9216}

# Where datagrams to roved's port go: one socket for established
# connections, one for handshakes.
udp_sockets() { nsx "$NS_SRV" ss -Huln "sport = :4433" | wc -l; }

for phase in one-source:5000 spoofed:5000 one-source:$BIG; do
	mode=${phase%:*}
	COUNT=${phase#*:}
	flood_phase "$mode" "$COUNT"
	kill -0 "$ROVED_PID" 2>/dev/null || die "roved died during the $mode flood"
	expect_eq "$mode: roved's UDP sockets on port 4433" 2 "$(udp_sockets)"
	mode="$mode x $COUNT"
	expect_eq "$mode: Initials sent" "$COUNT" "$FLOOD_SENT"
	log "$mode: $FLOOD_PPS Initials/s sent; roved answered with" \
		"$FLOOD_REPLY_PKTS datagrams ($FLOOD_REPLY_BYTES bytes)"
	log "$mode: roved used $FLOOD_CPU_S CPU s (idle again after" \
		"$FLOOD_BUSY_S s; -1: not within ${FLOOD_QUIET_MAX_S} s):" \
		"$FLOOD_PER_CPU_S Initials per CPU second"
	if [ "$FLOOD_ADMIT_MS" -ge 0 ] && [ "$FLOOD_ADMIT_MS" -le "$ADMIT_MS" ]; then
		ok "$mode: branch established $FLOOD_ADMIT_MS ms after rove up (<= $ADMIT_MS)"
	elif [ "$FLOOD_ADMIT_MS" -ge 0 ]; then
		fail "$mode: branch established only $FLOOD_ADMIT_MS ms after rove up (> $ADMIT_MS)"
	else
		fail "$mode: branch not established within $FLOOD_ADMIT_MAX_S s of rove up"
	fi
	if [ "$FLOOD_ASAN" = 1 ]; then
		bound=$((2 * (LIMIT_KB - FLOOD_PLAIN_IDLE_KB)))
		growth=$((FLOOD_PEAK_KB - FLOOD_IDLE_KB))
		if [ "$growth" -lt "$bound" ]; then
			ok "$mode: roved's VmRSS grew by $growth kB (idle $FLOOD_IDLE_KB, peak $FLOOD_PEAK_KB; < $bound under ASan)"
		else
			fail "$mode: roved's VmRSS grew by $growth kB (idle $FLOOD_IDLE_KB, peak $FLOOD_PEAK_KB; >= $bound under ASan)"
		fi
	elif [ "$FLOOD_PEAK_KB" -lt "$LIMIT_KB" ]; then
		ok "$mode: roved's peak RSS $FLOOD_PEAK_KB kB (idle $FLOOD_IDLE_KB; < $LIMIT_KB)"
	else
		fail "$mode: roved's peak RSS $FLOOD_PEAK_KB kB (idle $FLOOD_IDLE_KB; >= $LIMIT_KB)"
	fi
	pings="$FLOOD_PING_RX of $FLOOD_PING_TX answered ($((FLOOD_PING_TX - FLOOD_PING_RX)) lost), $FLOOD_PING_LATE after 1 s or more, max $FLOOD_PING_MAX_MS ms"
	if [ "$FLOOD_PING_TX" -gt 0 ] && [ "$FLOOD_PING_RX" = "$FLOOD_PING_TX" ]; then
		ok "$mode: pings through the laptop's tunnel: $pings"
	else
		fail "$mode: pings through the laptop's tunnel: $pings"
	fi
	expect_eq "$mode: laptop kept its connection" 1 "$FLOOD_LAP_OK"
	if [ "$FLOOD_RCVBUF_DROPS" -ne 0 ]; then
		log "$mode: roved's socket overflowed: the kernel dropped $FLOOD_RCVBUF_DROPS datagrams"
	fi
done
flood_stop_all
e2e_finish
