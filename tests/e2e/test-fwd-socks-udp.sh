#!/usr/bin/env bash
# e2e: light
# SOCKS5 UDP ASSOCIATE on a DynamicForward, with a SOCKS client rove did
# not write (PySocks, Debian's python3-socks): 100 datagrams of sizes 1 to
# 1200 bytes to a UDP echo server on the LAN host behind roved, every
# reply exact and naming the echo server as its source; datagrams to the
# relay from a foreign source (another port, another address) and
# fragments (FRAG not 0) are dropped and counted exactly; a UDP target
# that AllowForward names for TCP only is refused by roved and counted on
# both sides; closing the control connection closes the relay port. A
# second association over IPv6 (a DynamicForward on [::1]) to the echo
# server by name gets answers naming it by name. curl --socks5-hostname
# still works through the same proxy.
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
command -v curl >/dev/null || die "curl is not installed"
"$PY" -c 'import socks' 2>/dev/null || die "python3-socks (PySocks) is not installed"
topo_up

SOCKS_PORT=1080
SOCKS6_PORT=1081
ECHO_PORT=7777
DENIED_PORT=7778
HTTP_PORT=8000
N=100

peer_set laptop AllowForward "udp/$LAN_HOST/32:$ECHO_PORT, $LAN_HOST/32:$DENIED_PORT, $LAN_HOST/32:$HTTP_PORT"
client_add "$WORK/configs/rove.conf" "DynamicForward = 127.0.0.1:$SOCKS_PORT" \
	"DynamicForward = [::1]:$SOCKS6_PORT"
netns_etc "$NS_SRV" hosts "$LAN_HOST target.test"
mkdir "$WORK/www"
printf 'hello through socks\n' >"$WORK/www/hello.txt"
cat >"$WORK/echo.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
while True:
    d, a = s.recvfrom(65535)
    s.sendto(d, a)
PY
bg echo "$NS_LAN" "$PY" "$WORK/echo.py" "$LAN_HOST" "$ECHO_PORT"
bg http "$NS_LAN" "$PY" -m http.server "$HTTP_PORT" --bind "$LAN_HOST" --directory "$WORK/www"
wait_listen "$NS_LAN" "$HTTP_PORT" "the HTTP server"
udp_bound() { [ -n "$(nsx "$1" ss -Hlun "sport = :$2")" ]; }
wait_for 10 "the echo server on udp $ECHO_PORT" udp_bound "$NS_LAN" "$ECHO_PORT" ||
	die "the echo server does not listen: $(cat "$WORK/echo.log")"
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
wait_listen "$NS_LAP" "$SOCKS_PORT" "rove's DynamicForward"
wait_listen "$NS_LAP" "$SOCKS6_PORT" "rove's DynamicForward on [::1]"

srv_uc() { sget "$NS_SRV" "$ROVED_SOCK" "peers[name=laptop].udp_counters.$1"; }
lap_uc() { sget "$NS_LAP" "$LAP_SOCK" "peers[0].udp_counters.$1"; }

nsx "$NS_LAP" timeout 40 "$PY" "$E2E_DIR/socks-udp-client.py" "$SOCKS_PORT" \
	"$LAN_HOST" "$ECHO_PORT" "$DENIED_PORT" "$N" "$SOCKS6_PORT" target.test >"$WORK/client.out" 2>"$WORK/client.err" ||
	fail "the SOCKS UDP client: $(cat "$WORK/client.err")"
[ -s "$WORK/client.err" ] && log "client: $(cat "$WORK/client.err")"
res() { awk -v k="$1" '$1 == k { print $2 }' "$WORK/client.out"; }
expect_eq "datagrams echoed exactly, from the echo server" "$N" "$(res echoed)"
expect_eq "datagrams echoed wrong" 0 "$(res mismatched)"
expect_eq "datagrams without an answer" 0 "$(res lost)"
expect_eq "no answer to a foreign port of the client's address" True "$(res foreign_quiet_127.0.0.1)"
expect_eq "no answer to a foreign address" True "$(res foreign_quiet_127.0.0.2)"
expect_eq "no answer to fragments" True "$(res frag_quiet)"
expect_eq "no answer from a target outside AllowForward" True "$(res denied_quiet)"
expect_eq "the relay still answers its client" True "$(res after)"
expect_eq "the relay port stops answering once the control connection closes" True "$(res relay_closed)"
expect_eq "IPv6 association: reply" 0 "$(res v6_reply)"
expect_eq "IPv6 association: relay address" ::1 "$(res v6_relay)"
expect_eq "IPv6 association: datagrams echoed by name, header and all" 5 "$(res v6_echoed)"

expect_eq "rove's drops of foreign sources" 4 "$(lap_uc dropped_foreign_source)"
expect_eq "rove's drops of fragments" 2 "$(lap_uc dropped_frag)"
expect_eq "rove's drops of bad headers" 0 "$(lap_uc dropped_bad_header)"
expect_eq "rove's UDP flows opened (echo, denied, echo by name)" 3 "$(lap_uc opened)"
wait_for 5 "rove counts the refusal" eval '[ "$(lap_uc refused)" = 1 ]' ||
	fail "rove's UDP flows refused: $(lap_uc refused)"
expect_eq "roved's UDP flows refused" 1 "$(srv_uc refused)"
expect_eq "roved logs the refusal" 1 "$(grep -c "UDP forward to $LAN_HOST:$DENIED_PORT denied by AllowForward" "$WORK/roved.log")"
line=$(nsx "$NS_LAP" "$BUILD/rove" status -s "$LAP_SOCK" | grep 'udp flows:')
log "rove status: $line"
case $line in
*"udp flows: 3 opened, 1 refused, "*" frag=2 foreign_source=4"*) ok "rove status shows the flows and the drops" ;;
*) fail "rove status's UDP line: $line" ;;
esac
port=$(res relay_port)
if [ -n "$port" ] && ! udp_bound "$NS_LAP" "$port"; then
	ok "rove's relay port $port is closed"
else
	fail "rove's relay port ${port:-?} is still bound"
fi

# TCP through the same proxy, by name.
code=$(nsx "$NS_LAP" curl -sS --max-time 20 --socks5-hostname "127.0.0.1:$SOCKS_PORT" \
	-o "$WORK/hello.out" -w '%{http_code}' "http://target.test:$HTTP_PORT/hello.txt" 2>"$WORK/curl.err")
expect_eq "curl --socks5-hostname: HTTP status" 200 "$code"
expect_eq "curl --socks5-hostname: body" "hello through socks" "$(cat "$WORK/hello.out")"
fwd_finish
