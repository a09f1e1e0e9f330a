#!/usr/bin/env bash
# 10,000 random and QUIC-looking UDP datagrams at roved's port: roved keeps
# running and serving the laptop, answers with at most 3 times the bytes it
# was sent (no amplification), and does not log a line per datagram.
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
topo_up
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"

lines0=$(wc -l <"$WORK/roved.log")
out=$(nsx "$NS_BR" timeout 90 "$PY" "$E2E_DIR/garbage.py" "$SRV_OUTER" 4433 10000 "$$" 60) ||
	fail "garbage.py failed: $out"
log "garbage.py: $out"
field() { printf '%s' "$out" | jget "$1"; }
expect_eq "datagrams sent" 10000 "$(field sent)"
expect_eq "sender stopped by its time limit" false "$(field timed_out)"
sent=$(field sent_bytes)
got=$(field received_bytes)
if [ "$got" -le $((3 * sent)) ] 2>/dev/null; then
	ok "reply bytes $got <= 3 x $sent sent"
else
	fail "reply bytes $got > 3 x $sent sent (amplification)"
fi

if kill -0 "$ROVED_PID" 2>/dev/null; then ok "roved still runs"; else die "roved exited"; fi
lines1=$(wc -l <"$WORK/roved.log")
if [ $((lines1 - lines0)) -le 20 ]; then
	ok "roved logged $((lines1 - lines0)) lines for 10000 bad datagrams (<= 20)"
else
	fail "roved logged $((lines1 - lines0)) lines for 10000 bad datagrams (> 20)"
fi
expect_eq "laptop state" established "$(srv_get 'peers[name=laptop].state')"
expect_eq "laptop handshakes (connection kept)" 1 "$(srv_get 'peers[name=laptop].handshakes')"
check "laptop -> server $SRV_TUN4 after the garbage" ping_ok "$NS_LAP" -c 20 -i 0.05 "$SRV_TUN4"
check "LAN host -> laptop after the garbage" ping_ok "$NS_LAN" -c 5 -i 0.05 "$LAP_TUN4"
e2e_finish
