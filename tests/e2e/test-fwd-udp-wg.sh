#!/usr/bin/env bash
# WireGuard through a UDP LocalForward, with a VPN rove did not write:
# wireguard-go (trixie's, as the benchmarks take it; bookworm's
# /usr/bin/wireguard-go when that cannot be had) on the client behind the
# NAT router and on the LAN host behind roved. The client's WireGuard peer
# has Endpoint = 127.0.0.1:51820, rove's `LocalForward = udp/51820 =
# LAN:51820`, so WireGuard's handshake and data ride one rove UDP flow.
#  1. 20 pings through the WireGuard tunnel, all answered; exactly one UDP
#     flow listed each side, from WireGuard's port to its server.
#  2. The router forgets its NAT mappings (conntrack -F, 3 times) under a
#     ping every 0.1 s through WireGuard: rove's outer port changes, the
#     session stays (one handshake each side, no reconnect), the flow stays
#     (same context, one flow, none opened), a few pings lost at most.
#  2b. The client moves to a second uplink (link A down: another address,
#     behind another NAT address) and back, under that ping: the same
#     QUIC connection migrates (no handshake), the flow stays the same
#     (same context, none opened), 2 s of pings lost at most. Then link
#     B goes.
#  3. roved is killed and started again under that ping: rove reconnects,
#     and the next WireGuard datagram sets its flow up again without
#     wireguard-go being touched: exactly one more flow opened by rove, one
#     by the new roved, 2 s of pings lost at most, then 20 pings through
#     WireGuard all answered.
#  4. The router drops everything toward rove for 5 s, past rove's
#     IdleTimeout of 4 s: rove gives the session up and reconnects to the
#     same roved once packets pass again; roved, which still heard rove,
#     still holds the old session and replaces it. Again one more flow is
#     opened each side and 20 pings through WireGuard are all answered.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
. "$TOP/bench/lib-wg.sh"
roam_init "$@"
for p in wg ss; do
	command -v "$p" >/dev/null || die "$p is not installed (scripts/deps.sh installs it)"
done

# Trixie's wireguard-go from the dependency cache (fetched once per
# machine from Debian's mirror), else the host's bookworm package;
# ROVE_WG_GO in the environment names another binary.
WG_BIN=
if [ -n "${ROVE_WG_GO:-}" ]; then
	[ -x "$ROVE_WG_GO" ] || die "ROVE_WG_GO: $ROVE_WG_GO is not an executable"
	WG_BIN=$ROVE_WG_GO
	WG_VER="(ROVE_WG_GO)"
elif WG_BIN=$(timeout 120 "$TOP/scripts/wireguard-go.sh" 2>"$WORK/wireguard-go-fetch.log") &&
	[ -x "$WG_BIN" ]; then
	WG_VER="$(timeout 30 "$TOP/scripts/wireguard-go.sh" --version 2>/dev/null) (trixie)"
elif [ -x /usr/bin/wireguard-go ]; then
	log "trixie's wireguard-go cannot be had: $(tail -n 1 "$WORK/wireguard-go-fetch.log")"
	WG_BIN=/usr/bin/wireguard-go
	WG_VER="$(dpkg-query -W -f='${Version}' wireguard-go 2>/dev/null) (bookworm)"
else
	die "no wireguard-go (scripts/deps.sh installs bookworm's)"
fi
log "wireguard-go $WG_VER: $WG_BIN"

WG_FWD=51820          # rove's udp/ LocalForward and the WireGuard server's port
FLUSHES=3
MAX_LOST=$FLUSHES     # pings lost to the rebindings: one each at most
SILENT=5              # seconds nothing reaches rove, past its IdleTimeout

roam_topo_up
roam_configs
roam_two_uplinks two-nat
# A short IdleTimeout (4 s) for step 4: QUIC takes the smaller of both
# ends', so roved's connection would end as soon as rove's; only rove's
# side goes silent, so roved's starts later.
conf_set "$RCONF_C" KeepAlive 1
conf_set "$RCONF_C" IdleTimeout 4
sed -i "s|^AllowForward = 198.18.30.0/24:$FWD_PORT\$|&, udp/$LAN/32:$WG_FWD|" "$RCONF_S"
grep -q "^AllowForward = .*, udp/$LAN/32:$WG_FWD\$" "$RCONF_S" ||
	die "cannot allow udp/$LAN:$WG_FWD in roved.conf"
printf 'LocalForward = udp/%s = %s:%s\n' "$WG_FWD" "$LAN" "$WG_FWD" >>"$RCONF_C"
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"
udp_bound() { [ -n "$(nsx "$1" ss -Hlun "sport = :$2")" ]; }
wait_for 10 "rove's udp/$WG_FWD" udp_bound "$RNS_C" "$WG_FWD" ||
	die "rove does not bind udp/$WG_FWD"

# flows CLIENT|SERVER: "N CONTEXT SOURCE TARGET TX RX OPENED REFUSED" of
# rove's flows to its server, or of roved's for the laptop (the first
# flow's fields; "-" when there is none).
flows() {
	local doc peer
	if [ "$1" = client ]; then
		doc=$(status_try "$RNS_C" "$LAP_SOCK") peer=-
	else
		doc=$(status_try "$RNS_S" "$ROVED_SOCK") peer=laptop
	fi
	printf '%s\n' "$doc" | "$PY" -c '
import json, sys
peers = json.load(sys.stdin)["peers"]
p = peers[0] if sys.argv[1] == "-" else [x for x in peers if x["name"] == sys.argv[1]][0]
f, c = p["udp_flows"], p["udp_counters"]
x = f[0] if f else {}
# roved names no source: "-" keeps the fields in place.
print(len(f), *(x.get(k, "-") if x.get(k) != "" else "-" for k in
      ("context", "source", "target", "tx_datagrams", "rx_datagrams")),
      c["opened"], c["refused"])' "$peer"
}
# pings LOG: "SENT RECEIVED" of a ping's summary.
pings() {
	local g
	g=$(tool gaps "$1")
	echo "$(jf "$g" sent) $(jf "$g" received)"
}

# --- 1. WireGuard up through the forward; 20 pings.
wg_up u "$WG_BIN" "$RNS_L" "$RNS_C" 127.0.0.1 ||
	die "no ping crosses WireGuard through rove's udp/$WG_FWD"
WG_SRC=127.0.0.1:$(nsx "$RNS_C" wg show "$WG_IF_C" listen-port)
bg ping-up "$RNS_C" ping -D -n -c 20 -i 0.2 -W 2 "$WG_S_ADDR"
wait_exit "$BG_PID" 30
assert_eq "pings through WireGuard (sent, answered)" "20 20" "$(pings "$WORK/ping-up.log")"
read -r n ctx src tgt tx0 rx0 opened refused <<<"$(flows client)"
log "rove's flow: context $ctx, $src -> $tgt, $tx0 datagrams sent, $rx0 received"
assert_eq "rove's UDP flows listed" 1 "$n"
assert_eq "rove's flow from WireGuard's port to its server" "$WG_SRC -> $LAN:$WG_FWD" "$src -> $tgt"
assert_cmp "rove's flow: datagrams sent (handshake, 20 pings)" "$tx0" -ge 21
assert_cmp "rove's flow: datagrams received" "$rx0" -ge 21
assert_eq "rove's UDP flows opened, refused" "1 0" "$opened $refused"
CTX=$ctx
read -r n sctx src tgt _ srx0 opened refused <<<"$(flows server)"
assert_eq "roved's UDP flows listed" 1 "$n"
assert_eq "roved's flow: the same context, to WireGuard's server" "$CTX $LAN:$WG_FWD" "$sctx $tgt"
assert_eq "roved's UDP flows opened, refused" "1 0" "$opened $refused"

# --- 2. NAT rebinding under a ping every 0.1 s through WireGuard.
remote_before=$(sgetp remote)
rebinds_before=$(sgetp rebinds)
bg ping-rebind "$RNS_C" ping -D -n -i 0.1 -W 1 -w $((FLUSHES * 2 + 3)) "$WG_S_ADDR"
PING_PID=$BG_PID
flushed=0
for ((i = 0; i < FLUSHES; i++)); do
	sleep 2
	nsx "$RNS_R" conntrack -F >/dev/null 2>&1 && flushed=$((flushed + 1))
done
assert_eq "conntrack flushes done" "$FLUSHES" "$flushed"
wait_exit "$PING_PID" 30
read -r sent got <<<"$(pings "$WORK/ping-rebind.log")"
log "pings across $FLUSHES rebindings: $got of $sent answered, $((sent - got)) lost"
assert_cmp "pings sent across the rebindings" "$sent" -ge $((FLUSHES * 2 * 9))
assert_cmp "pings lost across $FLUSHES rebindings" "$((sent - got))" -le "$MAX_LOST"
remote_after=$(sgetp remote)
log "roved sees rove at $remote_before, then $remote_after"
if [ "$remote_after" != "$remote_before" ]; then
	pass "rove's outer address moved ($remote_before -> $remote_after)"
else
	failc "rove's outer address did not move: $remote_after"
fi
assert_cmp "roved's rebinds (one per flush at least)" \
	"$(($(sgetp rebinds) - rebinds_before))" -ge "$FLUSHES"
assert_eq "client's handshakes, reconnects" "1 0" "$(cget handshakes) $(cget reconnects)"
assert_eq "roved's handshakes with the laptop" 1 "$(sgetp handshakes)"
read -r n ctx src tgt tx _ opened refused <<<"$(flows client)"
assert_eq "rove's flow after the rebindings: count, context, source" \
	"1 $CTX $WG_SRC" "$n $ctx $src"
assert_eq "rove's UDP flows opened, refused" "1 0" "$opened $refused"
assert_cmp "rove's flow: datagrams sent across the rebindings" "$((tx - tx0))" -ge "$sent"
read -r n sctx src tgt _ srx opened refused <<<"$(flows server)"
assert_eq "roved's flow after the rebindings: count, context" "1 $CTX" "$n $sctx"
assert_eq "roved's UDP flows opened, refused" "1 0" "$opened $refused"
assert_cmp "roved's flow: datagrams received across the rebindings" "$((srx - srx0))" -ge "$got"

# --- 2b. The client moves to link B and back: the connection migrates.
mig0=$(cget migrations)
bg ping-move "$RNS_C" ping -D -n -i 0.1 -W 1 -w 8 "$WG_S_ADDR"
PING_PID=$BG_PID
sleep 1
# Its routes go with it: link B's default route is left.
ip -n "$RNS_C" link set ca down
wait_for 5 "the client's path on link B" client_local_is "$C_B" ||
	failc "the client did not move to link B: $(local_ip)"
sleep 2
ip -n "$RNS_C" link set ca up
ip -n "$RNS_C" route replace default via "$R_A" dev ca metric 100
wait_for 5 "the client's path back on link A" client_local_is "$C_A" ||
	failc "the client did not move back to link A: $(local_ip)"
wait_exit "$PING_PID" 30
read -r sent got <<<"$(pings "$WORK/ping-move.log")"
log "pings across two moves between uplinks: $got of $sent answered, $((sent - got)) lost"
assert_cmp "pings lost across two moves (2 s of them at most)" "$((sent - got))" -le 20
assert_cmp "client migrations across the two moves" "$(($(cget migrations) - mig0))" -ge 2
assert_eq "client's handshakes, reconnects after the moves" "1 0" \
	"$(cget handshakes) $(cget reconnects)"
read -r n ctx src _ _ _ opened refused <<<"$(flows client)"
assert_eq "rove's flow after the moves: count, context, source" \
	"1 $CTX $WG_SRC" "$n $ctx $src"
assert_eq "rove's UDP flows opened, refused after the moves" "1 0" "$opened $refused"
read -r n sctx _ _ _ _ opened refused <<<"$(flows server)"
assert_eq "roved's flow after the moves: count, context" "1 $CTX" "$n $sctx"
assert_eq "roved's UDP flows opened, refused after the moves" "1 0" "$opened $refused"
# Link B goes, so that what follows has one uplink: with two, a silent
# link A (step 4) would only move rove to link B.
ip -n "$RNS_C" link set cb down

# --- 3. roved restarts; WireGuard carries on through a new flow.
read -r _ _ _ _ _ _ lap_opened _ <<<"$(flows client)"
bg ping-restart "$RNS_C" ping -D -n -i 0.1 -W 1 -w 8 "$WG_S_ADDR"
PING_PID=$BG_PID
sleep 1
roam_kill_roved
roam_start_roved
if wait_for 15 "the client's second handshake" client_hs_is 2; then
	pass "rove reconnected"
else
	failc "rove did not reconnect (state $(cget state), handshakes $(cget handshakes))"
fi
wait_exit "$PING_PID" 30
g=$(tool gaps "$WORK/ping-restart.log")
read -r sent got <<<"$(pings "$WORK/ping-restart.log")"
log "pings across roved's restart: $got of $sent answered, $((sent - got)) lost," \
	"longest gap $(jf "$g" max_gap_ms) ms"
assert_cmp "pings lost across roved's restart (2 s of them at most)" \
	"$((sent - got))" -le 20
bg ping-again "$RNS_C" ping -D -n -c 20 -i 0.2 -W 2 "$WG_S_ADDR"
wait_exit "$BG_PID" 30
assert_eq "pings through WireGuard after the reconnect (sent, answered)" "20 20" \
	"$(pings "$WORK/ping-again.log")"
read -r n ctx src tgt _ _ opened refused <<<"$(flows client)"
log "rove's flow now: context $ctx, $src -> $tgt; drops: $(cget udp_counters)"
assert_eq "rove's UDP flows listed, from WireGuard's port" "1 $WG_SRC" "$n $src"
assert_eq "rove's UDP flows opened (one more), refused" "$((lap_opened + 1)) 0" \
	"$opened $refused"
read -r n sctx src tgt _ _ opened refused <<<"$(flows server)"
assert_eq "new roved's UDP flows: listed, context, target" "1 $ctx $LAN:$WG_FWD" \
	"$n $sctx $tgt"
assert_eq "new roved's UDP flows opened, refused" "1 0" "$opened $refused"
# --- 4. Nothing reaches rove for longer than its IdleTimeout: it gives
# the session up and, once packets pass again, reconnects to the same
# roved. roved kept hearing rove until then, so its idle timer has not
# run out: the new session replaces the old one (and its flow), and
# again the next datagram sets the flow up.
read -r _ _ _ _ _ _ lap_opened _ <<<"$(flows client)"
bg ping-silent "$RNS_C" ping -D -n -i 0.1 -W 1 -w $((SILENT + 5)) "$WG_S_ADDR"
PING_PID=$BG_PID
sleep 1
roam_drop silent on 'oifname "ra" drop'   # toward rove only
sleep "$SILENT"
roam_drop silent off
if wait_for 15 "the client's third handshake" client_hs_is 3; then
	pass "rove reconnected after $SILENT s without packets"
else
	failc "rove did not reconnect (state $(cget state), handshakes $(cget handshakes))"
fi
wait_exit "$PING_PID" 30
g=$(tool gaps "$WORK/ping-silent.log")
log "pings across $SILENT s without packets to rove: $(jf "$g" received) of $(jf "$g" sent)" \
	"answered, longest gap $(jf "$g" max_gap_ms) ms"
assert_cmp "longest ping gap (ms; nothing reached rove for $SILENT s)" \
	"$(jf "$g" max_gap_ms)" -le $(((SILENT + 2) * 1000))
bg ping-back "$RNS_C" ping -D -n -c 20 -i 0.2 -W 2 "$WG_S_ADDR"
wait_exit "$BG_PID" 30
assert_eq "pings through WireGuard after the outage (sent, answered)" "20 20" \
	"$(pings "$WORK/ping-back.log")"
assert_eq "roved's handshakes with the laptop (since its restart)" 2 "$(sgetp handshakes)"
assert_eq "roved's sessions of the laptop ended by its idle timeout" 0 \
	"$(grep -c 'peer laptop disconnected: idle timeout' "$WORK/roved.log")"
read -r n ctx src tgt _ _ opened refused <<<"$(flows client)"
assert_eq "rove's UDP flows listed, from WireGuard's port" "1 $WG_SRC" "$n $src"
assert_eq "rove's UDP flows opened (one more), refused" "$((lap_opened + 1)) 0" \
	"$opened $refused"
read -r n sctx src tgt _ _ opened refused <<<"$(flows server)"
assert_eq "roved's UDP flows: listed, context, target" "1 $ctx $LAN:$WG_FWD" \
	"$n $sctx $tgt"
assert_eq "roved's UDP flows opened (one per session), refused" "2 0" "$opened $refused"

for p in "$WG_C_PID" "$WG_S_PID"; do
	if kill -0 "$p" 2>/dev/null; then
		pass "wireguard-go (PID $p) ran throughout"
	else
		failc "wireguard-go (PID $p) exited: $(tail -n 3 "$WORK"/wg-u-*.log)"
	fi
done
wg_down
roam_stop_all
roam_finish
