#!/usr/bin/env bash
# A middlebox that cuts UDP flows: the router drops every packet of a UDP
# flow (one 5-tuple, both directions) once that flow has carried
# $CUT_BYTES, a budget each new flow gets afresh (conntrack's byte count).
# Default client settings (Transport = auto; roved listens on TCP too).
# While an echo conversation runs through the LocalForward (16 KiB there
# and back every 50 ms, each round compared) and a ping every 10 ms
# through the tunnel, the flow is cut again and again. After each cut rove
# must notice the silence and move the same QUIC connection to a new local
# port (a new 5-tuple, validated, no reconnect) before Transport = auto's
# TCP race begins: the session stays on QUIC, with one migration per cut,
# the conversation unbroken and no ping gap of 1.5 s. A capture on the
# client's link times each cut: when the old flow last heard from roved,
# the first packet from the new port, its first answer and the first ping
# reply after it.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
CUT_BYTES=${FLOWCUT_BYTES:-2500000}
MIN_CUTS=4
CHAT_SECS=22
roam_topo_up
roam_configs
server_key "$RCONF_S" ListenTCP "$S_OUT:443"
# The router counts each flow's bytes, and drops a flow past its budget;
# the set names the client ports (before the NAT) of the flows it cut.
nsx "$RNS_R" sysctl -qw net.netfilter.nf_conntrack_acct=1 ||
	die "cannot turn on conntrack's byte accounting in the router"
nsx "$RNS_R" nft -f - <<EOF || die "cannot load the flow cutter"
table ip flowcut {
	set cut {
		type inet_service
		flags dynamic
	}
	chain through {
		type filter hook forward priority -10; policy accept;
		meta l4proto udp ct bytes > $CUT_BYTES add @cut { ct original proto-src } counter drop
	}
}
EOF
cut_ports() {
	nsx "$RNS_R" nft -j list set ip flowcut cut | "$PY" -c '
import json, sys
for o in json.load(sys.stdin)["nftables"]:
    if "set" in o:
        print(len(o["set"].get("elem", [])))'
}

roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"
roam_echo_up
assert_eq "transport at the start" quic "$(cget transport)"
mig0=$(cget migrations)

tool_bg sniff "$RNS_C" sniff ca "$PORT" "$WORK/capture" --timeout 90 --head 4
SNIFF_PID=$BG_PID
wait_for 10 "the capture" ready_in "$WORK/sniff.log" || die "the capture did not start"

ping_bg ping $((CHAT_SECS + 2))
bg chat "$RNS_C" "$PY" "$E2E_DIR/fwd-peer.py" chat "127.0.0.1:$FWD_PORT" --size 16K \
	--interval 0.05 --duration "$CHAT_SECS" --timeout 90
CHAT_PID=$BG_PID
wait_exit "$CHAT_PID" $((CHAT_SECS + 40)) || failc "the echo conversation failed or overran"
wait_exit "$PING_PID" 30
# A cut in its last second still gets its move before anything is counted.
sleep 3
cuts=$(cut_ports)
mig=$(($(cget migrations) - mig0))
stop_pid "$SNIFF_PID"
forget_pid "$SNIFF_PID"

chat=$(tail -n 1 "$WORK/chat.log")
log "chat: $chat"
gaps=$(tool gaps "$WORK/ping.log")
log "ping: $gaps"
moves=$(tool moves "$WORK/capture" --server "$S_OUT:$PORT" --pings "$WORK/ping.log")
printf '%s\n' "$moves" | "$PY" -c '
import json, sys
m = json.load(sys.stdin)
for r in m["rows"]:
    print("cut at %.3f: %s -> %s, detected %s ms, answered %s ms, pings back %s ms, gap %s ms" % (
        r["cut_ns"] / 1e9, r["from"], r["to"], r["detect_ms"], r["answer_ms"],
        r["recover_ms"], r["gap_ms"]))' | while read -r line; do log "$line"; done
log "the router cut $cuts flows; rove migrated $mig times"

assert_cmp "flows the router cut" "$cuts" -ge "$MIN_CUTS"
# One move per cut: the first ask from a new port answers, so the
# back-off never asks again.
assert_eq "rove's migrations (one per cut)" "$cuts" "$mig"
assert_eq "moves seen on the client's link (one per cut)" "$cuts" "$(jf "$moves" moves)"
assert_eq "rove's moves to a new local port (one per cut)" "$cuts" "$(cget port_moves)"
assert_eq "log lines \"the path went silent: moving to a new local port\"" "$cuts" \
	"$(grep -c "the path went silent: moving to a new local port" "$WORK/laptop.log")"
# 1 s of silence, looked at the moment it is up (not at the next 250 ms
# tick), then a round trip.
assert_cmp "longest time from a cut to the first packet from a new port (ms)" \
	"$(jf "$moves" max_detect_ms)" -le 1100
assert_cmp "longest ping gap across a cut (ms)" "$(jf "$moves" max_gap_ms)" -lt 1500
assert_cmp "longest ping gap overall (ms)" "$(jf "$gaps" max_gap_ms)" -lt 1500
assert_eq "echo rounds that came back different" 0 "$(jf "$chat" mismatches)"
assert_eq "echo conversation errors" '[]' "$(jf "$chat" errors)"
assert_eq "echo conversation ended with EOF" true "$(jf "$chat" rx_eof)"
assert_cmp "echo rounds" "$(jf "$chat" rounds)" -ge $((CHAT_SECS * 10))
assert_eq "connections the echo server accepted" 1 "$(wc -l <"$WORK/accepts")"
assert_eq "forwards reset" 0 "$(cget forward_counters.reset)"
assert_eq "transport" quic "$(cget transport)"
assert_eq "moves to TCP" 0 "$(cget tcp_fallbacks)"
roam_assert_no_tcp_race
assert_eq "client reconnects" 0 "$(cget reconnects)"
assert_eq "client's handshakes" 1 "$(cget handshakes)"
assert_eq "roved's handshakes" 1 "$(sgetp handshakes)"
assert_eq "roved's failed path validations" 0 "$(sgetp path_validation_failures)"

# Quiet on the new flow, then traffic again: it still answers, without
# another move.
sleep 4
if nsx "$RNS_C" ping -c 3 -i 0.2 -W 1 "$S_TUN" >/dev/null; then
	pass "the tunnel answers after 4 s of quiet on the last flow"
else
	failc "no ping answer after 4 s of quiet on the last flow"
fi
assert_eq "rove's migrations after the quiet" "$mig" "$(($(cget migrations) - mig0))"
roam_stop_all
roam_finish
