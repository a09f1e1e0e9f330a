#!/usr/bin/env bash
# AllowForward cannot be walked around through other spellings of an
# address. roved's peer may reach the LAN (198.19.10.0/24), any IPv6
# address ([::/0]), multicast 224.0.0.0/4 and two names by rule, but not
# roved's own 127.0.0.1, where a "secret" echo service listens (also on
# [::1], for the unspecified IPv6 address). Each of these must be denied,
# on both sides' counters, and the secret service must never see a
# connection:
#   - 127.0.0.1 itself (the rule works at all);
#   - [::ffff:127.0.0.1], IPv4-mapped: by -L and by SOCKS (an IPv6 address,
#     so [::/0] would allow it if it were not read as IPv4);
#   - a name whose only address is ::ffff:127.0.0.1;
#   - a name allowed by a name rule that resolves to 0.0.0.0 (how DNS
#     sinkholes answer; Linux connects 0.0.0.0 to the local host), and one
#     that resolves to ::;
#   - [::], [::127.0.0.1] (IPv4-compatible, deprecated), [ff0e::1] and
#     224.0.0.1 (multicast), all inside the allowed prefixes.
# A name with a denied and an allowed address reaches the allowed one only.
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
topo_up

PORT=7301            # the secret service on roved's host; the LAN echo too
SOCKS_PORT=1080

peer_set laptop AllowForward "198.19.10.0/24:*, [::/0]:*, 224.0.0.0/4:*, sink.test:$PORT, sink6.test:$PORT"
client_add "$WORK/configs/rove.conf" \
	"LocalForward = 7001 = 127.0.0.1:$PORT" \
	"LocalForward = 7002 = [::ffff:127.0.0.1]:$PORT" \
	"DynamicForward = $SOCKS_PORT"
# Names come from roved's hosts file; anything else would go to a name
# server that is not there and fail.
netns_etc "$NS_SRV" hosts "::ffff:127.0.0.1 mapped.test
0.0.0.0 sink.test
:: sink6.test
::ffff:127.0.0.1 mixed.test
$LAN_HOST mixed.test"
netns_etc "$NS_SRV" resolv.conf "nameserver $LAN_HOST"
# roved resolves with AI_ADDRCONFIG, and libevent counts only an IPv6
# address outside fc00::/7 as a reason to ask for AAAA records: give roved's
# namespace one, on its loopback device, where it carries no traffic
# (2001:db8::/32 is the documentation prefix).
ip -n "$NS_SRV" addr add 2001:db8:77::1/128 dev lo ||
	die "cannot add an IPv6 address to roved's loopback"

secret_listening() {
	[ "$(nsx "$NS_SRV" ss -Hltn "sport = :$PORT" | wc -l)" -ge 2 ]
}

peer_bg secret4 "$NS_SRV" serve "127.0.0.1:$PORT" --echo --results "$WORK/secret.json"
peer_bg secret6 "$NS_SRV" serve "[::1]:$PORT" --echo --results "$WORK/secret.json"
peer_bg echo "$NS_LAN" serve "$LAN_HOST:$PORT" --echo --results "$WORK/echo.json"
wait_listen "$NS_LAN" "$PORT" "the LAN echo"
wait_for 10 "the secret services listen" secret_listening ||
	die "the secret services do not listen"
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
wait_listen "$NS_LAP" 7002 "rove's LocalForwards"
wait_listen "$NS_LAP" "$SOCKS_PORT" "rove's DynamicForward"

# denied WHAT LISTEN_PORT [SOCKS_TARGET]: a forward that roved must refuse
# as denied: the SOCKS reply 2 (not allowed by ruleset) or a reset, and
# "denied" counted once on each side.
denied() {
	local what=$1 port=$2 socks=${3:-} bl bs out closed args=()
	bl=$(lap_counters)
	bs=$(srv_counters)
	[ -n "$socks" ] && args=(--socks "$socks")
	out=$(peer_run "$NS_LAP" 20 probe "127.0.0.1:$port" --timeout 5 "${args[@]}")
	closed=$(jfield "$out" closed)
	if [ -n "$socks" ]; then
		expect_eq "$what: SOCKS5 reply code" 2 "$(jfield "$out" socks_rep)"
		case $closed in
		eof|reset) ok "$what: closed after the reply ($closed)" ;;
		*) fail "$what: after the reply the connection is '$closed'" ;;
		esac
	else
		expect_eq "$what: the client's connection is closed by" reset "$closed"
	fi
	expect_eq "$what: rove's counters" "denied+1" \
		"$(counters_delta "$bl" "$(lap_counters)")"
	expect_eq "$what: roved's counters" "denied+1" \
		"$(counters_delta "$bs" "$(srv_counters)")"
}

denied "127.0.0.1 (-L)" 7001
denied "IPv4-mapped literal (-L)" 7002
denied "IPv4-mapped literal (SOCKS)" "$SOCKS_PORT" "[::ffff:127.0.0.1]:$PORT"
denied "name with an IPv4-mapped address (SOCKS)" "$SOCKS_PORT" "mapped.test:$PORT"
denied "allowed name resolving to 0.0.0.0 (SOCKS)" "$SOCKS_PORT" "sink.test:$PORT"
denied "allowed name resolving to :: (SOCKS)" "$SOCKS_PORT" "sink6.test:$PORT"
denied "unspecified IPv6 literal (SOCKS)" "$SOCKS_PORT" "[::]:$PORT"
denied "IPv4-compatible literal (SOCKS)" "$SOCKS_PORT" "[::127.0.0.1]:$PORT"
denied "IPv6 multicast (SOCKS)" "$SOCKS_PORT" "[ff0e::1]:$PORT"
denied "IPv4 multicast (SOCKS)" "$SOCKS_PORT" "224.0.0.1:$PORT"

# mixed.test is ::ffff:127.0.0.1 first, then the LAN host: only the
# allowed address is used.
transfer_ok "$NS_LAP" "127.0.0.1:$SOCKS_PORT" 65536 \
	"name with a denied and an allowed address (SOCKS)" --socks "mixed.test:$PORT"
check "the LAN echo served that forward" has_lines "$WORK/echo.json" 1

wait_for 10 "roved's forwards list empties" srv_forwards_are 0 ||
	fail "roved still lists forwards"
expect_eq "connections the secret service saw" 0 "$(lines "$WORK/secret.json")"
alive "$ROVED_PID" roved
fwd_finish
