#!/usr/bin/env bash
# Transport = auto against a UDP policer: the router (the switch's bridge)
# lets roved's UDP through at 1 Mbit/s each way (nftables "limit rate
# over ... drop", as a carrier's traffic policer does) while TCP runs
# free. A bulk transfer through the tunnel (iperf3, paced at 40 Mbit/s so
# that the figures are the path's and not the CPU's):
#  - clean path: the session stays on QUIC, also at full speed;
#  - reference: UDP dropped, the session on TLS over TCP: its rate;
#  - policer on, an upload: rove sees its own packets lost at a steady
#    round trip, moves to TCP, and 10 s after the policer appeared the
#    transfer gets at least 80% of the reference; it stays on TCP (one
#    move, TCP's trial won, QUIC held off for 60 s);
#  - policer still on, a network change: a rate probe (a QUIC connection
#    roved echoes and never adopts) gets little of its offer back, so the
#    session stays on TCP, no handshake at roved, the hold doubled;
#  - policer off, a network change: the rate probe passes and the
#    session is back on QUIC;
#  - policer on, a download: the server's LOSS_REPORT tells rove, which
#    moves again; found again within a minute of the return, the hold
#    doubles again, to 240 s.
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
command -v iperf3 >/dev/null || die "iperf3 is not installed (scripts/deps.sh installs it)"
e2e_transport auto
topo_up
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"

. "$E2E_DIR/throttle-lib.sh"
RATE=40M
iperf_server

# 1. Clean path: paced, then as fast as it goes. No move.
iperf_bg clean 4 -b "$RATE"
iperf_wait clean
iperf_bg clean-full 4
iperf_wait clean-full
log "clean path on QUIC: $(mbits clean 1 4) Mbit/s paced, $(mbits clean-full 1 4) Mbit/s unpaced"
expect_eq "clean path: transport" quic "$(lap transport)"
expect_eq "clean path: moves to TCP" 0 "$(lap tcp_fallbacks)"

# 2. The reference: TLS over TCP. An idle path that stops passing UDP is
# noticed only once a packet goes unanswered: a ping while it does.
bg ping-block "$NS_LAP" ping -n -q -i 0.2 -W 1 -c 50 "$LAN_HOST"
ping_pid=$BG_PID
udp_block on
wait_for 10 "the session on TCP" transport_is tcp || fail "UDP blocked: the session did not move to TCP"
stop_pids "$ping_pid"
iperf_bg reference 5 -b "$RATE"
iperf_wait reference
ref=$(mbits reference 1 5)
log "reference (TLS over TCP): $ref Mbit/s"
udp_block off
nudge
expect_eq "reference: moves to TCP" 1 "$(lap tcp_fallbacks)"
expect_eq "reference: none of them from a policer" 0 "$(lap throttle_moves)"

# 3. The policer appears under an upload.
police on
t0=$(now)
iperf_bg upload 16 -b "$RATE"
wait_for 10 "the session on TCP" transport_is tcp || fail "policed upload: the session stayed on QUIC"
log "policed upload: on TCP after $(elapsed "$t0" "$(now)") s"
iperf_wait upload
share=$("$PY" -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$(mbits upload 10 16)" "$ref")
log "policed upload: $(mbits upload 0 2) Mbit/s in its first 2 s, $(mbits upload 10 16) Mbit/s from 10 s on: $share of the reference"
if ge "$share" 0.8; then ok "policed upload: $share of TLS over TCP's rate from 10 s on"
else fail "policed upload: only $share of TLS over TCP's rate from 10 s on (target 0.8)"; fi
expect_eq "policed upload: transport" tcp "$(lap transport)"
expect_eq "policed upload: moves to TCP" 2 "$(lap tcp_fallbacks)"
expect_eq "policed upload: moves from a throttled QUIC" 1 "$(lap throttle_moves)"
expect_eq "policed upload: back to QUIC (the reference's only)" 1 "$(lap quic_returns)"
check "policed upload: rove saw its own loss" grep -q "QUIC looks throttled: [0-9]*% of our packets lost at a steady round trip" "$WORK/laptop.log"
check "policed upload: TCP won its trial and QUIC is held off 60 s" \
	wait_for 10 "the trial's verdict" grep -q "staying on TCP, QUIC is tried again in 60 s" "$WORK/laptop.log"

# 4. The policer stays; a network change probes QUIC's rate at once. The
# probe is not a session: roved counts no handshake for it.
hs=$(srv_get 'peers[name=laptop].handshakes')
route_change add
check "policer still on: the rate probe finds it" \
	wait_for 15 "the rate probe's verdict" grep -q "still throttled, staying on TCP, QUIC is tried again in 120 s" "$WORK/laptop.log"
route_change del
grep "probing whether QUIC carries\|QUIC carried" "$WORK/laptop.log" | sed 's/^/    /'
expect_eq "policer still on: transport" tcp "$(lap transport)"
expect_eq "policer still on: back to QUIC (none more)" 1 "$(lap quic_returns)"
expect_eq "policer still on: rate probes that found it" 1 "$(lap throttle_probes_failed)"
expect_eq "policer still on: roved's handshakes for the laptop" "$hs" "$(srv_get 'peers[name=laptop].handshakes')"
check "policer still on: roved served the probe" grep -q "peer laptop probes QUIC's rate" "$WORK/roved.log"

# 5. The policer goes; a network change: the rate probe passes and the
# session moves back.
police off
t0=$(now)
nudge
log "policer gone: back on QUIC after $(elapsed "$t0" "$(now)") s"
expect_eq "policer gone: back to QUIC" 2 "$(lap quic_returns)"
check "policer gone: the rate probe passed" grep -q "the policer is gone, the session moves back" "$WORK/laptop.log"
expect_eq "policer gone: rate probes that found it" 1 "$(lap throttle_probes_failed)"

# 6. The policer again, under a download: the server's loss.
police on
t0=$(now)
# Four streams sharing the rate: a single one that the policer drove into
# retransmission back-off sends too little for roved to count its loss
# (under load is the watch's condition), and may stay there for seconds.
iperf_bg download 8 -b 10M -P 4 -R
# The server's loss reaches rove in LOSS_REPORTs on a stream that the
# policer delays too: a little more time than for the upload.
if ! wait_for 15 "the session on TCP" transport_is tcp; then
	fail "policed download: the session stayed on QUIC"
	grep "throttled\|trial\|TLS over TCP" "$WORK/laptop.log" | sed 's/^/    /'
fi
log "policed download: on TCP after $(elapsed "$t0" "$(now)") s"
iperf_wait download
log "policed download: $(mbits download 4 8) Mbit/s from 4 s on"
expect_eq "policed download: moves from a throttled QUIC" 2 "$(lap throttle_moves)"
check "policed download: the server's LOSS_REPORT told rove" grep -q "QUIC looks throttled: [0-9]*% of the server's packets lost" "$WORK/laptop.log"
# The trial's verdict comes 4 s after the move.
check "policed download: found again within a minute, the hold doubles" \
	wait_for 10 "the trial's verdict" grep -q "QUIC is tried again in 240 s" "$WORK/laptop.log"
grep "throttled\|trial\|TLS over TCP carries" "$WORK/laptop.log" | sed 's/^/    /'
police off
e2e_finish
