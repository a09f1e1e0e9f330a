#!/usr/bin/env bash
# Post-quantum key exchange (KeyExchange), on a build whose wolfSSL has
# X25519MLKEM768 (5.9.2):
#
# 1. Both sides hybrid (the default): the laptop (QUIC, with a key log)
#    and the branch (TLS over TCP) agree on X25519MLKEM768, which both
#    statuses and roved's metrics show; tshark finds group 0x11ec (4588)
#    in the ClientHello's key shares and in the ServerHello, and counts
#    the Initial packets of the laptop's first flight.
# 2. roved restarts: the laptop resumes with 0-RTT, again on X25519MLKEM768.
# 3. A classic laptop to the hybrid roved, and the hybrid laptop to a
#    classic roved: both connect, on x25519.
# 4. roved with pq-required refuses the classic laptop (TLS alert 40), and
#    each side says why; a pq-required laptop refuses a classic roved and
#    exits 1.
#
# On a build without it (wolfSSL 5.7.2): hybrid falls back to x25519 with
# one warning, and pq-required refuses to start, on either side.
# e2e: light
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
command -v tshark >/dev/null || die "tshark is not installed (scripts/deps.sh installs it)"
command -v tcpdump >/dev/null || die "tcpdump is not installed"
topo_up
C=$WORK/configs
KEYLOG=$WORK/keys.log
server_set ListenTCP "$SRV_OUTER:443"
client_add "$C/rove.conf" "KeyLogFile = $KEYLOG" "Transport = quic"
client_add "$C/rove2.conf" "Transport = tcp" "ServerTCP = $SRV_OUTER:443"

lap() { sget "$NS_LAP" "$LAP_SOCK" "peers[0].$1" 2>/dev/null; }
srv() { sget "$NS_SRV" "$ROVED_SOCK" "peers[name=$1].$2" 2>/dev/null; }
# lap_kex KEYEXCHANGE: the laptop's config says so (absent: the default).
lap_kex() {
	sed -i '/^KeyExchange = /d' "$C/rove.conf"
	[ -z "$1" ] || client_add "$C/rove.conf" "KeyExchange = $1"
}
# restart_roved NAME: the log so far kept as roved-NAME.log.
restart_roved() {
	stop_checked "$ROVED_PID" roved
	mv "$WORK/roved.log" "$WORK/roved-$1.log"
	start_roved
}
restart_laptop() {
	stop_checked "$LAP_PID" laptop
	mv "$WORK/laptop.log" "$WORK/laptop-$1.log"
	start_client laptop
}
# exits_with_error WHO MESSAGE CMD...: CMD exits non-zero within 10 s and
# its output holds MESSAGE.
exits_with_error() {
	local who=$1 msg=$2 rc=0
	shift 2
	timeout 10 "$@" >"$WORK/$who-start.log" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qF -- "$msg" "$WORK/$who-start.log"; then
		ok "$who refuses to start (exit $rc): $msg"
	else
		fail "$who: exit $rc, want an error naming '$msg'; it said: $(head -c 400 "$WORK/$who-start.log")"
	fi
}

bg capture "$NS_LAP" tcpdump -i eth0 --immediate-mode -U -w "$WORK/outer.pcap" udp port 4433
cap_pid=$BG_PID
sleep 1
start_roved
if grep -q "has no X25519MLKEM768" "$WORK/roved.log"; then
	PQ=0 WANT=x25519
	log "this build's wolfSSL has no X25519MLKEM768: checking the fallback"
	expect_eq "roved's fallback warnings" 1 \
		"$(grep -c 'KeyExchange = hybrid: .* has no X25519MLKEM768; using X25519 alone (no post-quantum key exchange)' "$WORK/roved.log")"
else
	PQ=1 WANT=X25519MLKEM768
fi
start_client laptop
start_client branch
wait_established laptop || die "laptop's tunnel does not come up"
wait_established branch || die "branch's tunnel (TLS over TCP) does not come up"
check "laptop -> server" ping_ok "$NS_LAP" -c 3 -i 0.05 "$SRV_TUN4"
expect_eq "laptop's key exchange (QUIC)" "$WANT" "$(lap key_exchange)"
expect_eq "roved's key exchange with the laptop (QUIC)" "$WANT" "$(srv laptop key_exchange)"
expect_eq "branch's key exchange (TLS over TCP)" "$WANT" "$(sget "$NS_BR" "$BR_SOCK" 'peers[0].key_exchange')"
expect_eq "roved's key exchange with the branch (TLS over TCP)" "$WANT" "$(srv branch key_exchange)"
expect_eq "roved's status text (laptop and branch)" 2 "$(nsx "$NS_SRV" "$BUILD/rove" status -s "$ROVED_SOCK" |
	grep -c "key exchange: $WANT ($([ $PQ = 1 ] && echo post-quantum hybrid || echo classic))")"
stop_checked "$BR_PID" branch
stop_checked "$LAP_PID" laptop
mv "$WORK/laptop.log" "$WORK/laptop-first.log"
sleep 0.5
stop_pid "$cap_pid"; forget_pid "$cap_pid"

tsk() {
	tshark -r "$WORK/outer.pcap" -o "tls.keylog_file:$KEYLOG" \
		-d udp.port==4433,quic "$@" 2>/dev/null
}
# Group IDs of the key shares, per handshake message: 1 ClientHello,
# 2 ServerHello (4588 = 0x11ec X25519MLKEM768, 29 = 0x001d x25519).
shares() {
	tsk -Y "tls.handshake.type == $1" -T fields \
		-e tls.handshake.extensions_key_share_group | head -n1
}
ch=$(shares 1) sh=$(shares 2)
log "key share groups: ClientHello [$ch], ServerHello [$sh]"
# The first handshake's sizes, for the record: the laptop's first flight
# (Initial packets, one send with GSO may carry several 1200-byte
# datagrams, so payload bytes are counted) and what roved sent before the
# laptop's second flight, against QUIC's 3x anti-amplification limit.
tsk -T fields -e ip.src -e udp.length -e quic.long.packet_type \
	-Y "udp.port == 4433" | head -n 12 >"$WORK/flights.txt"
flights=$(awk -v lap="$LAP_OUTER" '
	{ n = $2 - 8; if (n % 1200 == 0 && n > 1200) d = n / 1200; else d = 1 }
	$1 == lap && srv == 0 { c1 += n; cd += d; next }
	$1 != lap { srv += $2 - 8; sd += d; next }
	$1 == lap { exit }
	END { printf "client first flight %d bytes in %d datagrams; server reply before the client spoke again %d bytes in %d datagrams (%.2fx, limit 3x)", c1, cd, srv, sd, srv / c1 }' "$WORK/flights.txt")
log "$flights"
if [ $PQ = 1 ]; then
	expect_eq "ClientHello key shares (X25519MLKEM768, x25519)" "4588,29" "$ch"
	expect_eq "ServerHello key share" 4588 "$sh"
else
	expect_eq "ClientHello key shares (x25519)" 29 "$ch"
	expect_eq "ServerHello key share" 29 "$sh"
fi

# 2. 0-RTT on the hybrid group: the laptop resumes with the ticket of the
# first session once roved is back.
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up again"
restart_roved 0rtt
lap_resumed() { [ "$(lap state)" = established ] && [ "$(lap handshakes)" = 2 ]; }
wait_for 20 "the laptop to reconnect" lap_resumed || fail "laptop did not reconnect"
# (The laptop's own start resumed with 0-RTT too.)
expect_eq "0-RTT accepted (laptop's start, roved's restart)" 2 "$(lap zero_rtt.accepted)"
expect_eq "laptop's key exchange after resuming" "$WANT" "$(lap key_exchange)"
check "laptop -> server after resuming" ping_ok "$NS_LAP" -c 3 -i 0.05 "$SRV_TUN4"

# 3. A classic laptop to the hybrid roved; the hybrid laptop to a classic
# roved.
lap_kex classic
restart_laptop hybrid
wait_established laptop || fail "the classic laptop does not connect to the hybrid roved"
expect_eq "classic laptop to hybrid roved: laptop" x25519 "$(lap key_exchange)"
expect_eq "classic laptop to hybrid roved: roved" x25519 "$(srv laptop key_exchange)"
lap_kex ""
server_set KeyExchange classic
restart_roved hybrid
restart_laptop classic
wait_established laptop || fail "the hybrid laptop does not connect to the classic roved"
expect_eq "hybrid laptop to classic roved: laptop" x25519 "$(lap key_exchange)"
expect_eq "hybrid laptop to classic roved: roved" x25519 "$(srv laptop key_exchange)"
check "laptop -> classic server" ping_ok "$NS_LAP" -c 3 -i 0.05 "$SRV_TUN4"

if [ $PQ = 0 ]; then
	# 4'. pq-required cannot be had: neither program starts.
	stop_checked "$LAP_PID" laptop
	stop_checked "$ROVED_PID" roved
	server_set KeyExchange pq-required
	lap_kex pq-required
	exits_with_error roved "KeyExchange = pq-required, but this build's wolfSSL" \
		ip netns exec "$NS_SRV" "$BUILD/roved" -f -c "$C/roved.conf"
	exits_with_error rove "KeyExchange = pq-required, but this build's wolfSSL" \
		ip netns exec "$NS_LAP" "$BUILD/rove" up -f -c "$C/rove.conf"
	e2e_finish
fi

# 4. roved requires post-quantum: the classic laptop is refused, and each
# side says why.
server_set KeyExchange pq-required
restart_roved classic
lap_kex classic
restart_laptop pq-server
refused_logged() {
	grep -q "refused a handshake from $LAP_OUTER:[0-9]*: the peer offers no post-quantum key exchange (X25519MLKEM768), which KeyExchange = pq-required requires" "$WORK/roved.log" &&
	grep -q "cannot connect to $SRV_OUTER:4433 (QUIC): .*TLS alert 4[07].*: no key exchange in common; does the server require a post-quantum one (KeyExchange = pq-required)?" "$WORK/laptop.log"
}
if wait_for 10 "both sides to log the refusal" refused_logged; then
	ok "pq-required roved refused the classic laptop; both logs say why"
else
	fail "the refusal is not logged as documented"
	tail -n 5 "$WORK/roved.log" "$WORK/laptop.log"
fi
expect_eq "roved's laptop after the refusal" closed "$(srv laptop state)"
# The hybrid laptop is welcome.
lap_kex ""
restart_laptop refused
wait_established laptop || fail "the hybrid laptop does not connect to the pq-required roved"
expect_eq "hybrid laptop to pq-required roved" X25519MLKEM768 "$(lap key_exchange)"

# A pq-required laptop and a classic roved: the laptop gives up, exit 1.
server_set KeyExchange classic
restart_roved pq-required
lap_kex pq-required
stop_checked "$LAP_PID" laptop
mv "$WORK/laptop.log" "$WORK/laptop-hybrid2.log"
start_client laptop
lap_exited() { ! kill -0 "$LAP_PID" 2>/dev/null; }
if wait_for 15 "the pq-required laptop to give up" lap_exited; then
	rc=0; wait "$LAP_PID" 2>/dev/null || rc=$?
	forget_pid "$LAP_PID"
	expect_eq "pq-required laptop's exit status" 1 "$rc"
else
	fail "the pq-required laptop still runs against a classic roved"
fi
expect_eq "pq-required laptop's error" 1 "$(grep -c "cannot connect to $SRV_OUTER:4433 (QUIC): .*TLS alert 4[07].*: the server has no post-quantum key exchange (X25519MLKEM768), which KeyExchange = pq-required requires; refusing to connect" "$WORK/laptop.log")"
stop_checked "$ROVED_PID" roved
e2e_finish
