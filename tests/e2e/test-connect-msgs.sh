#!/usr/bin/env bash
# What rove says when it cannot connect, as someone setting it up first
# meets it: every attempt names where it goes and over what, a connection
# that never came up is not "lost", and each failure says what to check.
# A server name that does not resolve yet (no network at boot) is waited
# for, and looked up again before each reconnect, so a server that moves
# to another address is followed.
# e2e: light
. "$(dirname "$0")/fwd-lib.sh"
TEST_NAME=connect-msgs
fwd_init "$@"
topo_up
C=$WORK/configs/rove.conf

# logged SECS LOG TEXT WHAT: LOG holds a line with TEXT within SECS.
logged() {
	if wait_for "$1" "$4" grep -qF -- "$3" "$2"; then ok "$4"
	else fail "$4: no '$3' in $(basename "$2"): $(tail -n 5 "$2")"; fi
}
# laptop_run NAME: the laptop's rove with $C, its log in NAME.log.
laptop_run() {
	start_client laptop
	LOG=$WORK/$1.log
}
laptop_stop() {
	stop_pid "$LAP_PID"; forget_pid "$LAP_PID"
	mv "$WORK/laptop.log" "$LOG"
}

# --- 1. QUIC, nothing listening (no roved; ICMP replies filtered, as a
# firewall would): the attempt is named, and the handshake timeout says
# what to check, not "connection lost".
nsx "$NS_SRV" nft -f - <<'NFT' || die "cannot load the UDP drop"
table inet silent {
	chain in {
		type filter hook input priority 0; policy accept;
		udp dport 4433 drop
	}
}
NFT
laptop_run quic-silent
logged 3 "$WORK/laptop.log" "rove: connecting to $SRV_OUTER:4433 (QUIC)" \
	"QUIC, no answer: the attempt names the address and transport"
logged 15 "$WORK/laptop.log" \
	"rove: warning: cannot connect to $SRV_OUTER:4433 (QUIC): handshake timeout: no answer; is roved running and listening on that address family and port, and UDP let through?" \
	"QUIC, no answer: the failure says what to check"
logged 10 "$WORK/laptop.log" "rove: connecting to $SRV_OUTER:4433 (QUIC), attempt 2" \
	"QUIC, no answer: the next attempt is numbered"
laptop_stop
if grep -q "connection .*lost" "$LOG"; then fail "QUIC, no answer: a connection that never came up called lost"
else ok "QUIC, no answer: nothing called lost"; fi
if grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} rove: connecting' "$LOG"; then
	ok "the foreground log has timestamps"
else
	fail "the foreground log has no timestamps: $(head -n 1 "$LOG")"
fi
nsx "$NS_SRV" nft delete table inet silent

# --- 2. An IPv6 server address: printed in brackets.
ip -n "$NS_SRV" addr add fd00:1::1/64 dev eth0 nodad
ip -n "$NS_LAP" addr add fd00:1::2/64 dev eth0 nodad
cp "$C" "$C.orig"
sed -i 's/^Server = .*/Server = [fd00:1::1]:4433/' "$C"
laptop_run quic-v6
logged 3 "$WORK/laptop.log" "rove: connecting to [fd00:1::1]:4433 (QUIC)" \
	"an IPv6 server is printed in brackets"
laptop_stop
cp "$C.orig" "$C"

# --- 3. Transport = tcp against a roved without ListenTCP: the refusal
# names the address and asks about ListenTCP.
start_roved
# A second roved on the same port: the error names the line to change.
S2=$WORK/configs/roved-second.conf
cp "$WORK/configs/roved.conf" "$S2"
conf_set "$S2" ControlSocket "$WORK/second.sock"
conf_set "$S2" StateDir "$WORK/second-state"
conf_set "$S2" Tun rove9
out=$(nsx "$NS_SRV" timeout 10 "$BUILD/roved" -f -c "$S2" 2>&1)
rc=$?
expect_eq "a port in use: exit 1 and FILE:LINE" "1 $S2:$(grep -n '^Listen' "$S2" | cut -d: -f1): Listen: bind $SRV_OUTER:4433: Address already in use" \
	"$rc $(printf '%s\n' "$out" | sed -n 's/^.*roved: error: //p')"
# The same, on another port but the running roved's TUN device: who
# holds it is said.
conf_set "$S2" Listen "$SRV_OUTER:4434"
conf_set "$S2" Tun rove0
out=$(nsx "$NS_SRV" timeout 10 "$BUILD/roved" -f -c "$S2" 2>&1)
rc=$?
expect_eq "a TUN device in use: exit 1, and what to do" "1 creating TUN device rove0: Device or resource busy (another process holds it, such as a roved or rove on this host: give each its own Tun name)" \
	"$rc $(printf '%s\n' "$out" | sed -n 's/^.*roved: error: //p')"
printf 'Transport = tcp\nServerTCP = %s:443\n' "$SRV_OUTER" >>"$C"
laptop_run tcp-refused
logged 3 "$WORK/laptop.log" "rove: connecting to $SRV_OUTER:443 (TLS over TCP)" \
	"TCP: the attempt names the address and transport"
logged 5 "$WORK/laptop.log" \
	"rove: warning: cannot connect to $SRV_OUTER:443 (TLS over TCP): connect: Connection refused: nothing listens there; is ListenTCP set in roved.conf?" \
	"TCP refused: the failure asks about ListenTCP"
laptop_stop
cp "$C.orig" "$C"

# --- 4. The server by name, and no resolver answering at start: rove
# keeps trying, and connects once the name resolves.
DNS_ADDR=198.18.1.53
ip -n "$NS_SRV" addr add "$DNS_ADDR/24" dev eth0
netns_etc "$NS_LAP" resolv.conf "nameserver $DNS_ADDR
options timeout:1 attempts:1"
conf_set "$C" Server "vpn.rove.test:4433"
laptop_run dns
logged 5 "$WORK/laptop.log" "rove: warning: vpn.rove.test: Temporary failure in name resolution; trying again" \
	"a name that does not resolve at start is tried again"
if kill -0 "$LAP_PID" 2>/dev/null; then ok "rove keeps running without DNS"
else fail "rove exited without DNS"; fi
bg dns "$NS_SRV" "$PY" "$TOP/tests/e2e/dns-responder.py" "$DNS_ADDR" vpn.rove.test \
	"$SRV_OUTER" "$WORK/dns-queries.log" 60
wait_for 5 "the DNS responder" grep -q ready "$WORK/dns.log" || die "the DNS responder does not start"
if wait_established laptop; then ok "connected once the name resolved"
else fail "not connected after the name resolved"; fi

# --- 5. The server moves: the name now gives another address of its
# host; after the connection is lost, the reconnect follows the name.
NEW_ADDR=198.18.1.54
ip -n "$NS_SRV" addr add "$NEW_ADDR/24" dev eth0
stop_pid "$BG_PID"; forget_pid "$BG_PID"
bg dns2 "$NS_SRV" "$PY" "$TOP/tests/e2e/dns-responder.py" "$DNS_ADDR" vpn.rove.test \
	"$NEW_ADDR" "$WORK/dns-queries.log" 60
wait_for 5 "the DNS responder" grep -q ready "$WORK/dns2.log" || die "the DNS responder does not restart"
# The old address stops answering, and roved restarts: its shutdown
# closes the laptop's connection, and the reconnect asks the name again.
nsx "$NS_SRV" nft -f - <<NFT || die "cannot load the old address's drop"
table inet moved {
	chain in {
		type filter hook input priority 0; policy accept;
		ip daddr $SRV_OUTER udp dport 4433 drop
	}
}
NFT
stop_pid "$ROVED_PID"; forget_pid "$ROVED_PID"
mv "$WORK/roved.log" "$WORK/roved-1.log"
conf_set "$WORK/configs/roved.conf" Listen "$NEW_ADDR:4433"
start_roved
logged 20 "$WORK/laptop.log" "rove: vpn.rove.test now resolves to $NEW_ADDR:4433 (was $SRV_OUTER:4433)" \
	"the reconnect looked the name up again"
if wait_for 30 "the laptop on the new address" state_is "$NS_LAP" "$LAP_SOCK" 'peers[0].state' established; then
	ok "reconnected to the server's new address"
else
	fail "not reconnected to the new address"
fi
expect_eq "the laptop's session goes to the new address" "$NEW_ADDR:4433" \
	"$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].remote')"
laptop_stop
e2e_finish
