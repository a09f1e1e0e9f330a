#!/usr/bin/env bash
# 10,000 random and QUIC-looking UDP datagrams at roved's port: roved keeps
# running and serving the laptop, answers with at most 3 times the bytes it
# was sent (no amplification), and does not log a line per datagram. Then
# 2,000 at the laptop's own UDP port, forged to come from the server: rove
# keeps its connection.
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
topo_up
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"

lines0=$(wc -l <"$WORK/roved.log")
# A new seed each run, logged so that a failure can be replayed:
# ip netns exec NS python3 tests/e2e/garbage.py 198.18.1.1 4433 10000 SEED 60
seed=${GARBAGE_SEED:-$$}
log "garbage.py seed $seed"
out=$(nsx "$NS_BR" timeout 90 "$PY" "$E2E_DIR/garbage.py" "$SRV_OUTER" 4433 10000 "$seed" 60) ||
	fail "garbage.py failed: $out"
log "garbage.py: $out"
field() { printf '%s' "$out" | jget "$1"; }
if ! kill -0 "$ROVED_PID" 2>/dev/null; then
	die "roved died during the garbage (seed $seed; see roved.log below)"
fi
expect_eq "datagrams sent" 10000 "$(field sent)"
expect_eq "sender stopped by its time limit" false "$(field timed_out)"
sent=$(field sent_bytes)
got=$(field received_bytes)
if [ "$got" -le $((3 * sent)) ] 2>/dev/null; then
	ok "reply bytes $got <= 3 x $sent sent"
else
	fail "reply bytes $got > 3 x $sent sent (amplification)"
fi

ok "roved still runs"
log "roved drops after the garbage: $(srv_get drops)"
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

# The same at the client. Its UDP socket is connected to the server, so
# the kernel refuses datagrams from anyone else; these 2,000 come with the
# server's address and port as their (forged) source, as an on-path
# attacker could send them.
remote=$(srv_get 'peers[name=laptop].remote')
lport=${remote##*:}
log "laptop's UDP endpoint: $remote; garbage.py seed $((seed + 1))"
# udp_stat NS FIELD: a counter of the Udp: lines in /proc/net/snmp.
udp_stat() {
	# shellcheck disable=SC2016
	nsx "$1" awk -v f="$2" '$1 == "Udp:" && !n { for (i = 2; i <= NF; i++) h[i] = $i; n = 1; next }
		$1 == "Udp:" { for (i = 2; i <= NF; i++) if (h[i] == f) print $i }' /proc/net/snmp
}
in0=$(udp_stat "$NS_LAP" InDatagrams)
noport0=$(udp_stat "$NS_LAP" NoPorts)
out=$(nsx "$NS_BR" timeout 90 "$PY" "$E2E_DIR/garbage.py" "$LAP_OUTER" "$lport" 2000 \
	$((seed + 1)) 60 "$SRV_OUTER:4433") || fail "garbage.py failed: $out"
log "garbage.py: $out"
if ! kill -0 "$LAP_PID" 2>/dev/null; then
	die "rove died during the garbage (seed $((seed + 1)); see laptop.log below)"
fi
ok "rove still runs"
expect_eq "datagrams sent to the client" 2000 "$(field sent)"
in1=$(udp_stat "$NS_LAP" InDatagrams)
noport1=$(udp_stat "$NS_LAP" NoPorts)
log "laptop's kernel: UDP InDatagrams +$((in1 - in0)), NoPorts +$((noport1 - noport0))"
# Proof that the forged datagrams reached rove's socket rather than being
# refused by the kernel.
if [ $((in1 - in0)) -ge 1000 ]; then
	ok "the client's socket received the forged datagrams"
else
	fail "the client's socket received only $((in1 - in0)) datagrams of 2000"
fi
expect_eq "laptop state (its view)" established "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].state')"
expect_eq "laptop handshakes (its view)" 1 "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].handshakes')"
check "laptop -> server $SRV_TUN4 after garbage at the client" ping_ok "$NS_LAP" -c 20 -i 0.05 "$SRV_TUN4"
e2e_finish
