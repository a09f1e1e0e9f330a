#!/usr/bin/env bash
# DynamicForward (SOCKS5) with curl: an HTTP server on the LAN host
# (python3 -m http.server) fetched through rove's SOCKS port by name
# (--socks5-hostname: the name target.test is resolved by roved, from its
# namespace's hosts file) and by address (--socks5): HTTP 200 and the exact
# body bytes, and each request shows up as one completed dynamic forward.
# The forwards are given on the command line as ssh takes them: -D for the
# SOCKS port, and -L for a local forward to the same server by name. 300
# silent connections to the SOCKS port cost rove at most 256 descriptors
# (the oldest negotiation goes), and a real request still gets through.
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
command -v curl >/dev/null || die "curl is not installed"
topo_up

HTTP_PORT=8000
SOCKS_PORT=1080
SIZE=$((3 * 1024 * 1024 + 17))   # not a multiple of any buffer size

peer_set laptop AllowForward "$LAN_HOST/32:$HTTP_PORT"
LOCAL_PORT=8081
netns_etc "$NS_SRV" hosts "$LAN_HOST target.test"
mkdir "$WORK/www"
head -c "$SIZE" /dev/urandom >"$WORK/www/blob.bin"
printf 'hello through socks\n' >"$WORK/www/hello.txt"
want=$(sha256sum <"$WORK/www/blob.bin" | cut -d' ' -f1)

bg http "$NS_LAN" "$PY" -m http.server "$HTTP_PORT" --bind "$LAN_HOST" --directory "$WORK/www"
wait_listen "$NS_LAN" "$HTTP_PORT" "the HTTP server"
start_roved
start_client laptop "$WORK/configs/rove.conf" -D "127.0.0.1:$SOCKS_PORT" \
	-L "$LOCAL_PORT:target.test:$HTTP_PORT"
wait_established laptop || die "laptop's tunnel does not come up"
wait_listen "$NS_LAP" "$SOCKS_PORT" "rove's -D forward"
wait_listen "$NS_LAP" "$LOCAL_PORT" "rove's -L forward"

# fetch WHAT CURL_PROXY_OPTION URL FILE EXPECTED_SHA256 EXPECTED_SIZE
fetch() {
	local what=$1 opt=$2 url=$3 file=$4 sha=$5 len=$6 code bl bs
	bl=$(lap_counters)
	bs=$(srv_counters)
	code=$(nsx "$NS_LAP" curl -sS --max-time 30 "$opt" "127.0.0.1:$SOCKS_PORT" \
		-o "$file" -w '%{http_code}' "$url" 2>"$WORK/curl.err")
	expect_eq "$what: HTTP status" 200 "$code"
	[ -s "$WORK/curl.err" ] && log "curl: $(cat "$WORK/curl.err")"
	expect_eq "$what: body size" "$len" "$(stat -c %s "$file" 2>/dev/null || echo 0)"
	expect_eq "$what: body sha256" "$sha" "$(sha256sum <"$file" | cut -d' ' -f1)"
	wait_for 10 "$what: roved's forward closes" srv_forwards_are 0 ||
		fail "$what: roved still lists forwards"
	expect_eq "$what: rove's counters" "opened+1 completed+1" \
		"$(counters_delta "$bl" "$(lap_counters)")"
	expect_eq "$what: roved's counters" "opened+1 completed+1" \
		"$(counters_delta "$bs" "$(srv_counters)")"
}

fetch "by name" --socks5-hostname "http://target.test:$HTTP_PORT/blob.bin" \
	"$WORK/byname.bin" "$want" "$SIZE"
fetch "by address" --socks5 "http://$LAN_HOST:$HTTP_PORT/blob.bin" \
	"$WORK/byaddr.bin" "$want" "$SIZE"
fetch "small file by name" --socks5-hostname "http://target.test:$HTTP_PORT/hello.txt" \
	"$WORK/hello.txt" "$(sha256sum <"$WORK/www/hello.txt" | cut -d' ' -f1)" 20
expect_eq "small file content" "hello through socks" "$(cat "$WORK/hello.txt")"
bl=$(lap_counters)
code=$(nsx "$NS_LAP" curl -sS --max-time 30 -o "$WORK/bylocal.bin" -w '%{http_code}' \
	"http://127.0.0.1:$LOCAL_PORT/blob.bin" 2>"$WORK/curl.err")
expect_eq "-L to a name: HTTP status" 200 "$code"
expect_eq "-L to a name: body sha256" "$want" "$(sha256sum <"$WORK/bylocal.bin" | cut -d' ' -f1)"
wait_for 10 "-L: roved's forward closes" srv_forwards_are 0 || fail "-L: roved still lists forwards"
expect_eq "-L: rove's counters" "opened+1 completed+1" "$(counters_delta "$bl" "$(lap_counters)")"
# A port AllowForward does not name: the SOCKS5 reply is 2 ("connection
# not allowed by ruleset"), which curl reports as error 97 ending in "(2)".
rc=0
code=$(nsx "$NS_LAP" curl -sS --max-time 10 --socks5-hostname "127.0.0.1:$SOCKS_PORT" \
	-o /dev/null -w '%{http_code}' "http://target.test:8001/" 2>"$WORK/curl.err") || rc=$?
expect_eq "port outside AllowForward: curl exit status" 97 "$rc"
expect_eq "port outside AllowForward: no HTTP status" 000 "$code"
if grep -q 'SOCKS5 .*(2)$' "$WORK/curl.err"; then
	ok "curl reports SOCKS5 reply 2: $(cat "$WORK/curl.err")"
else
	fail "curl's error for a denied target: $(cat "$WORK/curl.err")"
fi

# 300 connections to the SOCKS port that never say a word: rove holds at
# most 256 negotiations (each a descriptor), closing the oldest, and a
# real SOCKS client still gets through at once.
fds0=$(ls "/proc/$LAP_PID/fd" | wc -l)
bg silent "$NS_LAP" "$PY" "$E2E_DIR/hold-conns.py" "$SOCKS_PORT" 300 "$WORK/silent" 30
wait_for 10 "300 silent SOCKS connections" test -s "$WORK/silent.n" ||
	fail "the silent SOCKS connections were not made"
sleep 0.5
fds1=$(ls "/proc/$LAP_PID/fd" | wc -l)
if [ $((fds1 - fds0)) -le 256 ]; then
	ok "300 silent SOCKS connections: rove holds $((fds1 - fds0)) more descriptors (<= 256)"
else
	fail "300 silent SOCKS connections: rove holds $((fds1 - fds0)) more descriptors (> 256)"
fi
fetch "small file by name, with 300 silent SOCKS connections" --socks5-hostname \
	"http://target.test:$HTTP_PORT/hello.txt" "$WORK/hello2.txt" \
	"$(sha256sum <"$WORK/www/hello.txt" | cut -d' ' -f1)" 20
expect_eq "small file content, with them" "hello through socks" "$(cat "$WORK/hello2.txt")"
expect_eq "rove's log lines about SOCKS negotiations closed" 1 \
	"$(grep -c 'SOCKS negotiations at once' "$WORK/laptop.log")"
touch "$WORK/silent.stop"
fwd_finish
