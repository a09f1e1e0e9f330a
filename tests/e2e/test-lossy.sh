#!/usr/bin/env bash
# Stall regression test: a lossy wide-area path must slow the tunnel down,
# never stop it. The router's delay relay loses packets at random, in each
# direction on its own, in two settings run one after the other on the same
# connection: 1% loss with a 44 ms round trip, then 5% loss with a 20 ms
# round trip. In each, 20 s of bulk TCP run through the tunnel both ways at
# once (iperf3 --bidir to roved's tunnel address) while the client pings
# that address every 100 ms. Checked per setting:
#  - ping keeps answering: no 10 consecutive echo requests go unanswered
#    (with a 0.1 s interval, 10 in a row means the two answered requests
#    around them were sent 1.1 s apart, a gap over 1 s), and no two
#    successive replies arrive more than 1.0 s apart (ping -D receive
#    times), which also catches answers held up rather than lost. At 5%
#    loss each way the bound on that gap is 2.0 s: there a tail of lost
#    probes (PTOs of about 65, 130, 260 and 520 ms, each probe or its ACK
#    lost with a chance of 1 in 10) can hold the datagram queue for close
#    to a second, once in a few runs; a stall lasts far longer;
#  - bulk data arrives in every 1-second interval in each direction,
#    counted where it is received: roved's side of iperf3 for the client's
#    upload, the client's side for its download. Only a last interval
#    shorter than 0.5 s (the tail end of a run) may be empty. At 5% loss
#    each way the inner TCP itself may sit out a second in retransmission
#    back-off (its RTO doubles from 200 ms when a retransmission is lost
#    too) while the tunnel carries the pings above without a gap: there,
#    an empty second may occur, but never two in a row.
# Each setting's throughput, ping figures and the relay's loss counters go
# to the log. ROAM_SEED=N in the environment repeats the relay's losses.
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
command -v iperf3 >/dev/null || die "iperf3 is not installed (scripts/deps.sh installs it)"

BULK_SECS=20

roam_topo_up 22 1
roam_configs
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"

# relay_counters LOG: the loss and forwarding lines the relay printed.
relay_counters() {
	grep -E '^delay-relay: (delay|a->b|b->a)' "$1" | sed 's/^/    /'
}

# tunnel_counters WHO NS SOCKET: what one end says of its connection, for
# reading a failure (or a slow direction): path figures, DATAGRAM losses and
# queue drops, and its nonzero drop counters. Cumulative over the test.
tunnel_counters() {
	status_try "$2" "$3" 2>/dev/null | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
p = d["peers"][0] if d.get("peers") else {}
keys = ("state", "rtt_ms", "min_rtt_ms", "cwnd", "tx_packets", "rx_packets",
        "datagrams_lost", "datagrams_queue_full", "datagrams_stale")
drops = {k: v for k, v in dict(d.get("drops", {}), **p.get("drops", {})).items() if v}
print("    %s: %s, drops %s" % (sys.argv[1],
      ", ".join("%s %s" % (k, p.get(k, "-")) for k in keys), drops or "none"))
' "$1" || log "no status from $1"
}

# lossy_run TAG PORT [MAX_RUN [MAX_GAP]]: one setting; MAX_RUN empty
# 1-second intervals in a row are tolerated (default 0: none at all), and
# replies at most MAX_GAP seconds apart (default 1.0).
lossy_run() {
	local tag=$1 port=$2 max_run=${3:-0} max_gap=${4:-1.0} srv ping_pid rc out what n empty
	log "$tag: relay delay $ROAM_DELAY ms each way, loss $ROAM_LOSS% each way"
	# A server of its own per setting: a run cut short cannot leave a
	# half-finished test in the way of the next. -J on the server too:
	# only then does --get-server-output hand its intervals over as JSON.
	bg "iperf3-srv-$tag" "$RNS_S" iperf3 -s -1 -J -B "$S_TUN" -p "$port"
	srv=$BG_PID
	wait_for 10 "iperf3 server on $S_TUN:$port" tcp_port_open "$RNS_S" "$port" ||
		die "iperf3 server does not listen"
	# Started first and running past the end, so it spans the whole
	# transfer, connection set-up and result exchange included.
	bg "ping-$tag" "$RNS_C" ping -D -n -i 0.1 -W 1 -w $((BULK_SECS + 4)) "$S_TUN"
	ping_pid=$BG_PID
	# Bounded: a stalled tunnel can hold iperf3 in its result exchange.
	timeout -k 5 $((BULK_SECS + 15)) ip netns exec "$RNS_C" iperf3 -c "$S_TUN" \
		-p "$port" --bidir -t "$BULK_SECS" -i 1 -J --get-server-output \
		>"$WORK/iperf3-$tag.json" 2>"$WORK/iperf3-$tag.err"
	rc=$?
	[ "$rc" -eq 0 ] || failc "$tag: iperf3 client exited with status $rc"
	# Both end on their own (ping at its deadline, the server after its
	# one test); wait_exit kills either if it overstays.
	wait_exit "$ping_pid" 10 >/dev/null
	wait_exit "$srv" 5 >/dev/null

	out=$("$PY" - "$WORK/ping-$tag.log" "$WORK/iperf3-$tag.json" <<-'EOF'
	import json, re, sys

	ping_log, iperf_json = sys.argv[1], sys.argv[2]
	seqs, stamps, sent = set(), [], 0
	for line in open(ping_log, errors="replace"):
	    m = re.match(r"\[(\d+\.\d+)\] \d+ bytes from .*icmp_seq=(\d+)", line)
	    if m and "DUP!" not in line:
	        stamps.append(float(m.group(1)))
	        seqs.add(int(m.group(2)))
	    m = re.match(r"(\d+) packets transmitted", line)
	    if m:
	        sent = int(m.group(1))
	# Requests are numbered 1..sent; 0 and sent+1 bracket the list so
	# that a silence at either end counts as well.
	answered = [0] + sorted(s for s in seqs if 1 <= s <= sent) + [sent + 1]
	run, run_at = 0, 0
	for a, b in zip(answered, answered[1:]):
	    if b - a - 1 > run:
	        run, run_at = b - a - 1, a + 1
	gap, gap_at = 0.0, 0.0
	for a, b in zip(stamps, stamps[1:]):
	    if b - a > gap:
	        gap, gap_at = b - a, a - stamps[0]
	print("ping_sent=%d" % sent)
	print("ping_answered=%d" % (len(answered) - 2))
	print("ping_run=%d" % run)
	print("ping_run_at=%d" % run_at)
	print("ping_gap=%.3f" % gap)
	print("ping_gap_at=%.1f" % gap_at)

	try:
	    d = json.load(open(iperf_json))
	except (OSError, ValueError) as e:
	    print("iperf_error=%s" % str(e).replace("\n", " "))
	    sys.exit(0)
	errors = [d["error"]] if "error" in d else []
	srv = d.get("server_output_json") or {}
	if not srv:
	    errors.append("no report from the server (upload intervals unknown)")
	print("iperf_error=%s" % "; ".join(errors).replace("\n", " "))
	# Receiver side of each direction: roved's for the upload, the
	# client's own (the reverse half of --bidir) for the download.
	for name, ivs, key in (("up", srv.get("intervals", []), "sum"),
	                       ("down", d.get("intervals", []), "sum_bidir_reverse")):
	    sums = [iv[key] for iv in ivs if key in iv]
	    full = [s for s in sums if s["seconds"] >= 0.5]
	    empty = ["%.0f-%.0f" % (s["start"], s["end"]) for s in full if s["bytes"] <= 0]
	    run = longest = 0
	    for s in full:
	        run = run + 1 if s["bytes"] <= 0 else 0
	        longest = max(longest, run)
	    print("%s_empty_run=%d" % (name, longest))
	    total = sum(s["bytes"] for s in sums)
	    secs = sum(s["seconds"] for s in sums)
	    print("%s_intervals=%d" % (name, len(full)))
	    print("%s_empty=%d" % (name, len(empty)))
	    print("%s_empty_at=%s" % (name, ",".join(empty) or "none"))
	    print("%s_mbit=%.2f" % (name, total * 8 / secs / 1e6 if secs > 0 else 0.0))
	    print("%s_per_s=%s" % (name, " ".join("%.1f" % (s["bits_per_second"] / 1e6)
	                                         for s in full)))
	end = d.get("end", {})
	print("up_retrans=%s" % end.get("sum_sent", {}).get("retransmits", "?"))
	print("down_retrans=%s" % end.get("sum_sent_bidir_reverse", {}).get("retransmits", "?"))
	EOF
	) || { failc "$tag: cannot analyse the ping and iperf3 output"; return; }
	printf '%s\n' "$out" | sed "s/^/    $tag /"

	tunnel_counters rove "$RNS_C" "$LAP_SOCK"
	tunnel_counters roved "$RNS_S" "$ROVED_SOCK"

	# field KEY: one value of the analysis.
	field() { printf '%s\n' "$out" | sed -n "s/^$1=//p"; }
	what=$(field iperf_error)
	[ -z "$what" ] || failc "$tag: iperf3 reports: $what"
	log "$tag: upload $(field up_mbit) Mbit/s ($(field up_retrans) retransmits)," \
		"download $(field down_mbit) Mbit/s ($(field down_retrans) retransmits)"
	log "$tag: ping $(field ping_answered)/$(field ping_sent) answered, longest silence" \
		"$(field ping_run) requests from icmp_seq=$(field ping_run_at), longest gap between" \
		"replies $(field ping_gap) s at +$(field ping_gap_at) s"
	assert_cmp "$tag: echo requests sent" "$(field ping_sent)" -ge $((BULK_SECS * 10))
	assert_cmp "$tag: longest run of unanswered echo requests" "$(field ping_run)" -le 9
	assert_cmp "$tag: longest gap between echo replies (s)" "$(field ping_gap)" -le "$max_gap"
	for what in up down; do
		n=$(field ${what}_intervals)
		empty=$(field ${what}_empty)
		[ "$n" -ge "$BULK_SECS" ] ||
			failc "$tag: $what: the receiver reported $n 1-second intervals, expected $BULK_SECS"
		if [ "$empty" = 0 ] && [ "$n" -gt 0 ]; then
			pass "$tag: $what: bytes in each of $n 1-second intervals"
		elif [ "$max_run" -gt 0 ] && [ "$(field ${what}_empty_run)" -le "$max_run" ]; then
			pass "$tag: $what: bytes in $((n - empty)) of $n 1-second intervals, never $((max_run + 1)) empty in a row (empty at s $(field ${what}_empty_at))"
		else
			failc "$tag: $what: no bytes in $empty interval(s), at s $(field ${what}_empty_at)"
		fi
	done
}

lossy_run "loss1-rtt44" 5201

roam_delay_set 10 5
log "relay counters of the first setting:"
relay_counters "$WORK/delay-relay-1.log"
wait_for 10 "the tunnel through the new relay" quiet_ping "$RNS_C" "$S_TUN" ||
	die "the tunnel does not carry pings through the new relay"

lossy_run "loss5-rtt20" 5202 1 2.0

roam_stop_all
stop_pid "$RELAY_PID"
forget_pid "$RELAY_PID"
log "relay counters of the second setting:"
relay_counters "$WORK/delay-relay.log"
roam_finish
