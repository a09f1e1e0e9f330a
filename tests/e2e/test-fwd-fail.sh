#!/usr/bin/env bash
# Forwards whose target fails: refused (closed port on the LAN host), denied
# (outside AllowForward), unreachable (an "unreachable" route in roved's
# namespace), timeout (SYNs dropped; roved gives up after 10 s) and, through
# SOCKS, a name that does not resolve (roved's resolver gets NXDOMAIN).
# The denied target is allowed for UDP only (udp/ rules, by address and by
# name), which must not open it to TCP.
# Each: the client's connection is closed with a reset (SOCKS: the matching
# error reply first) within 1 s (timeout: at 10 s), and exactly one failure
# counter rises by one on each side. Afterwards both daemons still run and
# fresh forwards work.
# e2e: light
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
topo_up

T_PORT=7101          # the echo target on the LAN host
CLOSED_PORT=7999     # nothing listens there
DROP_PORT=7998       # SYNs dropped on the LAN host
DENIED=$SRV_OUTER:9  # not in AllowForward
NOWHERE=198.19.99.1  # routed "unreachable" in roved's namespace
SOCKS_PORT=1080
BADNAME=nosuch.invalid

peer_set laptop AllowForward "198.19.10.0/24:*, 198.19.99.0/24:*, udp/$DENIED, udp/denied.test:*"
client_add "$WORK/configs/rove.conf" \
	"LocalForward = 7001 = $LAN_HOST:$CLOSED_PORT" \
	"LocalForward = 7002 = $DENIED" \
	"LocalForward = 7003 = $NOWHERE:80" \
	"LocalForward = 7004 = $LAN_HOST:$DROP_PORT" \
	"LocalForward = 7005 = $LAN_HOST:$T_PORT" \
	"DynamicForward = $SOCKS_PORT"
# roved resolves names with target.test from its hosts file and everything
# else from an NXDOMAIN-only DNS server on the LAN host.
netns_etc "$NS_SRV" hosts "$LAN_HOST target.test
${DENIED%:*} denied.test"
netns_etc "$NS_SRV" resolv.conf "nameserver $LAN_HOST"
ip -n "$NS_SRV" route add unreachable 198.19.99.0/24 || die "cannot add the unreachable route"
nsx "$NS_LAN" nft -f - <<EOF || die "cannot add the nft drop rule"
table inet fwdtest {
	chain input {
		type filter hook input priority 0;
		tcp dport $DROP_PORT drop
	}
}
EOF
peer_bg nxdns "$NS_LAN" nxdns "$LAN_HOST:53"
peer_bg echo "$NS_LAN" serve "$LAN_HOST:$T_PORT" --echo --results "$WORK/echo.json"
wait_listen "$NS_LAN" "$T_PORT" "the echo target"
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
wait_listen "$NS_LAP" 7005 "rove's LocalForwards"
wait_listen "$NS_LAP" "$SOCKS_PORT" "rove's DynamicForward"

# case WHAT COUNTER MAX_MS LISTEN_PORT [SOCKS_TARGET SOCKS_REP]: one failing
# forward and what it must do.
case_() {
	local what=$1 counter=$2 max_ms=$3 port=$4 socks=${5:-} rep=${6:-}
	local bl bs out closed ms args=()
	bl=$(lap_counters)
	bs=$(srv_counters)
	[ -n "$socks" ] && args=(--socks "$socks")
	out=$(peer_run "$NS_LAP" 30 probe "127.0.0.1:$port" --timeout 20 "${args[@]}")
	closed=$(jfield "$out" closed)
	ms=$(jfield "$out" ms)
	CASE_MS=$ms
	if [ -n "$socks" ]; then
		expect_eq "$what: SOCKS5 reply code" "$rep" "$(jfield "$out" socks_rep)"
		case $closed in
		eof|reset) ok "$what: closed after the reply ($closed)" ;;
		*) fail "$what: after the reply the connection is '$closed'" ;;
		esac
	else
		expect_eq "$what: the client's connection is closed by" reset "$closed"
	fi
	if awk -v m="$ms" -v x="$max_ms" 'BEGIN { exit !(m < x) }'; then
		ok "$what: closed after $ms ms (< $max_ms)"
	else
		fail "$what: closed after $ms ms, expected < $max_ms"
	fi
	expect_eq "$what: rove's counters" "$counter+1" \
		"$(counters_delta "$bl" "$(lap_counters)")"
	expect_eq "$what: roved's counters" "$counter+1" \
		"$(counters_delta "$bs" "$(srv_counters)")"
}

case_ "refused (-L)" refused 1000 7001
case_ "denied (-L)" denied 1000 7002
LAP_KEY=$(nsx "$NS_LAP" "$BUILD/rove" pubkey <"$(conf_path "$WORK/configs/rove.conf" PrivateKeyFile)")
check "denied (-L): rove names the key the server's AllowForward is for" \
	grep -qF "local forward to $DENIED for server failed: denied (not in the server's AllowForward for this client's key $LAP_KEY)" "$WORK/laptop.log"
case_ "unreachable (-L)" unreachable 1000 7003
case_ "refused (SOCKS)" refused 1000 "$SOCKS_PORT" "$LAN_HOST:$CLOSED_PORT" 5
case_ "denied (SOCKS)" denied 1000 "$SOCKS_PORT" "$DENIED" 2
case_ "denied by name, allowed for UDP only (SOCKS)" denied 1000 \
	"$SOCKS_PORT" "denied.test:${DENIED##*:}" 2
case_ "unreachable (SOCKS)" unreachable 1000 "$SOCKS_PORT" "$NOWHERE:80" 4
case_ "unresolvable name (SOCKS)" name 5000 "$SOCKS_PORT" "$BADNAME:80" 4
case_ "timeout (-L)" timeout 12000 7004
# roved gives up on a silent target after TCP_CONNECT_TIMEOUT_MS (10 s).
if awk -v m="$CASE_MS" 'BEGIN { exit !(m >= 9900) }'; then
	ok "timeout: not before 10 s ($CASE_MS ms)"
else
	fail "timeout: closed after $CASE_MS ms, before roved's 10 s connect timeout"
fi
check "roved asked the DNS server" grep -q 'nxdns: answered' "$WORK/nxdns.log"

# Nothing is left behind, both daemons run, and fresh forwards work.
wait_for 10 "roved's forwards list empties" srv_forwards_are 0 ||
	fail "roved still lists forwards"
wait_for 10 "rove's forwards list empties" lap_forwards_are 0 ||
	fail "rove still lists forwards"
alive "$ROVED_PID" roved
alive "$LAP_PID" rove
transfer_ok "$NS_LAP" "127.0.0.1:7005" 1048576 "-L after the failures"
transfer_ok "$NS_LAP" "127.0.0.1:$SOCKS_PORT" 1048576 "SOCKS by name after the failures" \
	--socks "target.test:$T_PORT"
fwd_finish
