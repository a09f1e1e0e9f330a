#!/usr/bin/env bash
# 0-RTT replay: the client's first flight of a 0-RTT reconnect (Initial with
# the ticket, 0-RTT packets with numbered UDP datagrams for the LAN host) is
# captured at roved's interface and sent again to roved from the router
# three times: while the connection lives, after roved forgot it, and after
# a roved restart (the ticket register is on disk). No datagram may reach
# the LAN host twice, and the spent ticket must get no 0-RTT: roved's
# counters of 0-RTT connections and of packets from the laptop stay put.
# The router delays each direction by 25 ms so that the datagrams sent every
# 10 ms during the handshake travel in 0-RTT.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up 25
roam_configs
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"
have_ticket() { compgen -G "$LAP_STATE/session-*" >/dev/null; }
wait_for 10 "the client's session ticket" have_ticket || die "no session ticket in $LAP_STATE"

SINK_PORT=9000
tool_bg sink "$RNS_L" udp-sink "$LAN:$SINK_PORT" "$WORK/sink" --timeout 200
wait_for 10 "the UDP sink" ready_in "$WORK/sink.log" || die "udp-sink did not start"
tool_bg sniff "$RNS_S" sniff eth0 "$PORT" "$WORK/capture" --timeout 200
wait_for 10 "the capture" ready_in "$WORK/sniff.log" || die "the capture does not start"
# Numbered datagrams every 10 ms, across roved's restart, then silence.
tool_bg send "$RNS_C" udp-send "$LAN:$SINK_PORT" --interval 0.01 --duration 1.5
SEND_PID=$BG_PID
sleep 0.5

t_kill=$(now_ns)
roam_kill_roved
roam_start_roved
wait_for 15 "the client's 0-RTT reconnect" client_hs_is 2 ||
	die "client did not reconnect (state $(cget state), handshakes $(cget handshakes))"

# wolfSSL accepts a ticket only while its age matches the client's claim
# within about 10 s, so the three replays follow the original flight
# closely (their checks come afterwards, from snapshots): then only the
# register of spent tickets can refuse them.
dups() { jf "$(tool dups "$WORK/sink")" duplicates; }
replay() {
	REPLAY_MS=$(($(now_ns) / 1000000))
	nsx "$RNS_R" "$PY" "$ROAM_TOOL" replay "$WORK/capture" "$S_OUT:$PORT" \
		--after "$t_kill" --wait 0.3 >"$WORK/replay-$1.json"
	sleep 0.3
}
srv_doc() { status_try "$RNS_S" "$ROVED_SOCK"; }
kill_client() {
	kill -KILL "$LAP_PID"
	wait "$LAP_PID" 2>/dev/null
	forget_pid "$LAP_PID"
}

# 1. While the connection lives: the replay names its connection IDs.
replay live
ms_live=$REPLAY_MS
srv_live=$(srv_doc)
cli_live=$(status_try "$RNS_C" "$LAP_SOCK")
dups_live=$(dups)

# 2. The connection is gone (a restarted client replaced it, so roved
# forgot its connection IDs): the replay starts a new connection with the
# spent ticket.
kill_client
mv "$WORK/laptop.log" "$WORK/laptop-1.log"
roam_start_client
restarted_in() { [ "$(sgetp handshakes)" = 2 ] && server_state_is established; }
wait_for 10 "roved to take the restarted client" restarted_in ||
	die "the restarted client does not connect"
srv_before=$(srv_doc)
replay spent-ticket
ms_spent=$REPLAY_MS
srv_spent=$(srv_doc)
dups_spent=$(dups)

# 3. roved restarted (the client gone): the register came back from StateDir.
kill_client
rc=0
stop_pid "$ROVED_PID" || rc=$?
forget_pid "$ROVED_PID"
roam_start_roved
replay restarted
ms_restarted=$REPLAY_MS
srv_restarted=$(srv_doc)
dups_restarted=$(dups)
assert_eq "roved exit status after SIGTERM (with a replayed handshake pending)" 0 "$rc"

flight=$(tool flight "$WORK/capture" --to "$S_OUT:$PORT" --after "$t_kill")
log "captured first flight: $flight"
t_orig=$(($(jf "$flight" first_initial_ns) / 1000000))
assert_cmp "0-RTT packets in the captured flight" "$(jf "$flight" zero_rtt)" -ge 1
assert_eq "client's 0-RTT accepted on the reconnect" 1 "$(jf "$cli_live" 'peers[0].zero_rtt.accepted')"
assert_eq "roved's connections with 0-RTT accepted" 1 \
	"$(jf "$srv_live" 'peers[name=laptop].zero_rtt.accepted')"
wait_exit "$SEND_PID" 20
log "sender: $(tail -n 1 "$WORK/send.log")"
assert_cmp "datagrams the LAN host received" "$(wc -l <"$WORK/sink")" -gt 0

# check NAME MS: what every replay must leave unchanged.
check_replay() {
	local name=$1 r
	r=$(cat "$WORK/replay-$name.json")
	log "replay $name, $(($2 - t_orig)) ms after the original: $r"
	assert_eq "replay $name: datagrams sent again" "$(jf "$flight" datagrams)" "$(jf "$r" sent)"
	assert_cmp "replay $name: ms after the original flight (ticket age window)" \
		$(($2 - t_orig)) -lt 9000
	REPLAY=$r
}
lap() { jf "$1" "peers[name=laptop].$2"; }

check_replay live "$ms_live"
assert_eq "replay live: roved's handshakes" 1 "$(lap "$srv_live" handshakes)"
assert_eq "replay live: client still on its connection (handshakes)" 2 \
	"$(jf "$cli_live" 'peers[0].handshakes')"
assert_eq "replay live: duplicated datagrams" 0 "$dups_live"

check_replay spent-ticket "$ms_spent"
assert_cmp "replay spent-ticket: roved answered the replayed Initial (datagrams)" \
	"$(jf "$REPLAY" answers)" -ge 1
assert_eq "replay spent-ticket: roved's handshakes" "$(lap "$srv_before" handshakes)" \
	"$(lap "$srv_spent" handshakes)"
assert_eq "replay spent-ticket: roved's 0-RTT connections" \
	"$(lap "$srv_before" zero_rtt.accepted)" "$(lap "$srv_spent" zero_rtt.accepted)"
assert_eq "replay spent-ticket: packets roved took from the laptop" \
	"$(lap "$srv_before" rx_packets)" "$(lap "$srv_spent" rx_packets)"
assert_eq "replay spent-ticket: duplicated datagrams" 0 "$dups_spent"

check_replay restarted "$ms_restarted"
assert_cmp "replay restarted: roved answered the replayed Initial (datagrams)" \
	"$(jf "$REPLAY" answers)" -ge 1
assert_eq "replay restarted: roved's handshakes" 0 "$(lap "$srv_restarted" handshakes)"
assert_eq "replay restarted: roved's 0-RTT connections" 0 \
	"$(lap "$srv_restarted" zero_rtt.accepted)"
assert_eq "replay restarted: packets roved took from the laptop" 0 \
	"$(lap "$srv_restarted" rx_packets)"
assert_eq "replay restarted: duplicated datagrams" 0 "$dups_restarted"
assert_eq "duplicated datagrams at the end" 0 "$(dups)"

rc=0
stop_pid "$ROVED_PID" || rc=$?
forget_pid "$ROVED_PID"
assert_eq "roved exit status after SIGTERM" 0 "$rc"
for f in "$WORK"/laptop*.log "$WORK"/roved*.log; do
	sanitizer_clean "$f" "$(basename "$f" .log)"
done
roam_finish
