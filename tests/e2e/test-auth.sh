#!/usr/bin/env bash
# Pinned-key authentication: a client whose key the server does not know,
# and a client that expects another server key, get no tunnel and exit 1;
# roved counts and logs the unknown peer and goes on serving the laptop.
# e2e: light
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
SRV_OUTER6=fd00:18:1::1
BR_OUTER6_NET=fd00:18:1:
topo_up
# roved also listens on an IPv6 address of the outer network, for the
# unknown client that comes from two addresses of one /64 (on TCP as well
# when the test runs over TLS on TCP, ROVE_TRANSPORT=tcp).
ip -n "$NS_SRV" addr add "$SRV_OUTER6/64" dev eth0 nodad
sed -i -e "/^Listen *=/a Listen = [$SRV_OUTER6]:4433" \
	-e "/^ListenTCP *=/a ListenTCP = [$SRV_OUTER6]:443" "$WORK/configs/roved.conf"
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"

K=$WORK/configs/keys
genkey "$K/intruder.key" >/dev/null
OTHER_PUB=$(genkey "$K/other.key")

# client_conf NAME: a copy of rove2.conf (the branch) with its own socket and
# state directory, in $WORK/configs/NAME.conf.
client_conf() {
	local c=$WORK/configs/$1.conf
	cp "$WORK/configs/rove2.conf" "$c"
	conf_set "$c" ControlSocket "run/$1.sock"
	conf_set "$c" StateDir "state/$1"
	printf '%s\n' "$c"
}

# run_client NAME CONFIG: rove up in the branch namespace, bounded to 30 s;
# exit status in $RC, output in $WORK/NAME.log.
run_client() {
	RC=0
	nsx "$NS_BR" timeout 30 "$BUILD/rove" up -f -c "$2" >"$WORK/$1.log" 2>&1 || RC=$?
}

# no_tun WHAT: the branch namespace has no rove0 left.
no_tun() {
	if ip -n "$NS_BR" link show rove0 >/dev/null 2>&1; then
		fail "$1: rove0 exists in the client's namespace after it exited"
	else
		ok "$1: no rove0 left in the client's namespace"
	fi
}

# expect_rejected_twice WHAT PREFIX: since U0 was read, roved counted at
# least two unknown-peer handshakes, and logged exactly one line starting
# with PREFIX (its log limit holds them to one a minute).
expect_rejected_twice() {
	local u1 n
	u1=$(srv_get drops.unknown_peer)
	if [ "$u1" -ge $((U0 + 2)) ] 2>/dev/null; then
		ok "server drops.unknown_peer rose from $U0 to $u1 (>= 2 attempts$1)"
	else
		fail "server drops.unknown_peer: $U0 before, $u1 after two attempts$1"
	fi
	n=$(grep -cF "$2" "$WORK/roved.log")
	expect_eq "roved log lines '$2...' for two attempts$1 within a minute" 1 "$n"
}

U0=$(srv_get drops.unknown_peer)
c=$(client_conf intruder)
conf_set "$c" PrivateKeyFile keys/intruder.key
for attempt in 1 2; do
	run_client "intruder-$attempt" "$c"
	expect_eq "unknown client, attempt $attempt: exit status" 1 "$RC"
	if grep -q rejected "$WORK/intruder-$attempt.log"; then
		ok "unknown client, attempt $attempt: logs 'rejected'"
	else
		fail "unknown client, attempt $attempt: no 'rejected' in its log"
		sed 's/^/    /' "$WORK/intruder-$attempt.log"
	fi
	no_tun "unknown client, attempt $attempt"
done
expect_rejected_twice "" "unknown peer $BR_OUTER:"

# Two attempts from different addresses of one IPv6 /64: one log line, as
# one host holds the whole prefix.
c6=$(client_conf intruder6)
conf_set "$c6" PrivateKeyFile keys/intruder.key
# (conf_set's check would read the brackets as a pattern)
sed -i -e "s|^Server *=.*|Server = [$SRV_OUTER6]:4433|" \
	-e "s|^ServerTCP *=.*|ServerTCP = [$SRV_OUTER6]:443|" "$c6"
U0=$(srv_get drops.unknown_peer)
for host in 3 4; do
	ip -n "$NS_BR" addr add "$BR_OUTER6_NET:$host/64" dev eth0 nodad
	run_client "intruder6-$host" "$c6"
	expect_eq "unknown client from $BR_OUTER6_NET:$host: exit status" 1 "$RC"
	ip -n "$NS_BR" addr del "$BR_OUTER6_NET:$host/64" dev eth0
done
expect_rejected_twice " from one IPv6 /64" "unknown peer [$BR_OUTER6_NET:"

expect_eq "the intruder is not listed among the server's peers" \
	'["laptop","branch"]' \
	"$(status "$NS_SRV" "$ROVED_SOCK" | "$PY" -c 'import json,sys; print(json.dumps([p["name"] for p in json.load(sys.stdin)["peers"]], separators=(",", ":")))')"
expect_eq "branch (not connected) state" closed "$(srv_get 'peers[name=branch].state')"

c=$(client_conf mismatch)
conf_set "$c" ServerPublicKey "$OTHER_PUB"
run_client mismatch "$c"
expect_eq "wrong ServerPublicKey: exit status" 1 "$RC"
if grep -q "server public key mismatch" "$WORK/mismatch.log"; then
	ok "wrong ServerPublicKey: logs 'server public key mismatch'"
else
	fail "wrong ServerPublicKey: no 'server public key mismatch' in its log"
	sed 's/^/    /' "$WORK/mismatch.log"
fi
no_tun "wrong ServerPublicKey"

# roved is still there and still serves the laptop.
if kill -0 "$ROVED_PID" 2>/dev/null; then ok "roved still runs"; else fail "roved exited"; fi
expect_eq "laptop state" established "$(srv_get 'peers[name=laptop].state')"
expect_eq "laptop handshakes (no reconnect)" 1 "$(srv_get 'peers[name=laptop].handshakes')"
check "laptop -> server $SRV_TUN4" ping_ok "$NS_LAP" -c 10 -i 0.05 "$SRV_TUN4"

# The genuine branch client with its real key still gets in.
start_client branch
if wait_established branch; then ok "branch connects after the failed attempts"; else fail "branch does not connect"; fi

# A saved session belongs to the key that made it: a client with another
# key (unknown to roved) and the branch's StateDir, where the branch has
# just saved its ticket, must not resume the branch's session.
stop_pid "$BR_PID"
forget_pid "$BR_PID"
# (Over TLS on TCP there are no tickets: the other key must fail all the
# same.)
if [ "${ROVE_TRANSPORT:-quic}" != tcp ]; then
	compgen -G "$WORK/configs/state/branch/session-*" >/dev/null ||
		fail "the branch saved no session to resume"
fi
BR_HS=$(srv_get 'peers[name=branch].handshakes')
U0=$(srv_get drops.unknown_peer)
c=$(client_conf newkey)
conf_set "$c" StateDir state/branch
conf_set "$c" PrivateKeyFile keys/intruder.key
run_client newkey "$c"
expect_eq "another key with the branch's StateDir: exit status" 1 "$RC"
expect_eq "another key with the branch's StateDir: the branch's handshakes at roved" \
	"$BR_HS" "$(srv_get 'peers[name=branch].handshakes')"
u1=$(srv_get drops.unknown_peer)
if [ "$u1" -gt "$U0" ] 2>/dev/null; then
	ok "another key with the branch's StateDir: counted as an unknown peer ($U0 -> $u1)"
else
	fail "another key with the branch's StateDir: drops.unknown_peer $U0 -> $u1"
fi
no_tun "another key with the branch's StateDir"
e2e_finish
