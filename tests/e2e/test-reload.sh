#!/usr/bin/env bash
# Reloading the configuration (SIGHUP) without dropping anyone. While
# each reload of roved runs, the peers it leaves alone ping the server
# every 20 ms: not one packet may be lost, and their connections must be
# the same ones (connection ID and handshake count unchanged).
#  1. add: a peer that roved refused before the reload connects after it,
#     and its ticket resumes; a changed KeepAlive is reported as needing a
#     restart;
#  2. AllowedIPs: a prefix added to the branch is routed to it at once
#     (route into roved's TUN, pings to an address behind the branch)
#     over the branch's same connection, and goes again when removed;
#     the laptop's Address changes on its live connection, and back;
#  3. key change: the laptop's old key is disconnected, refused again with
#     its ticket, and its new key connects;
#  4. remove: the added peer is disconnected and its ticket refused;
#  5. bad config: a file with errors is refused with FILE:LINE: messages,
#     and so is a new peer whose Address the address pool gave another;
#     nothing changes;
#  6. rove: a LocalForward added listens, one removed stops listening while
#     a connection made through it keeps echoing, a bad file changes
#     nothing; a RemoteForward added is served, taken back when removed
#     (roved stops listening), and closed when roved's AllowRemoteForward
#     drops its port.
# e2e: light
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
topo_up
up_all
CONF=$WORK/configs/roved.conf
BR_CONF=$WORK/configs/rove2.conf

srv_peer() { srv_get "peers[name=$1].$2"; }

# client_sock WHO: the control socket of a client (laptop or branch).
client_ns() { case $1 in laptop) echo "$NS_LAP" ;; branch) echo "$NS_BR" ;; esac; }
client_sock() { case $1 in laptop) echo "$LAP_SOCK" ;; branch) echo "$BR_SOCK" ;; esac; }

# conn_of WHO: what identifies WHO's connection: the connection ID roved
# shows, the one the client shows, and roved's handshake count for it.
conn_of() {
	printf '%s %s %s\n' "$(srv_peer "$1" connection_id)" \
		"$(sget "$(client_ns "$1")" "$(client_sock "$1")" 'peers[0].connection_id')" \
		"$(srv_peer "$1" handshakes)"
}

# pings_start WHO...: each client pings the server's tunnel address every
# 20 ms for 3 s, in the background.
declare -A PING_PID CONN_BEFORE
pings_start() {
	local who
	for who in "$@"; do
		CONN_BEFORE[$who]=$(conn_of "$who")
		bg "ping-$who" "$(client_ns "$who")" ping -n -i 0.02 -c 150 -W 2 "$SRV_TUN4"
		PING_PID[$who]=$BG_PID
	done
	# The reload happens while they run.
	sleep 0.5
}

# pings_check CASE WHO...: every ping answered, and the same connection.
pings_check() {
	local what=$1 who out
	shift
	for who in "$@"; do
		wait "${PING_PID[$who]}"
		forget_pid "${PING_PID[$who]}"
		out=$(cat "$WORK/ping-$who.log")
		if printf '%s\n' "$out" | grep -q '^150 packets transmitted, 150 received'; then
			ok "$what: $who's 150 pings during the reload all answered"
		else
			fail "$what: $who lost pings during the reload: $(printf '%s\n' "$out" | tail -n 2 | tr '\n' ' ')"
			log "unanswered icmp_seq: $(printf '%s\n' "$out" | "$PY" -c '
import re, sys
got = {int(m.group(1)) for m in re.finditer(r"icmp_seq=(\d+) ", sys.stdin.read())}
print(" ".join(str(i) for i in range(1, 151) if i not in got))')"
			dump_counters
		fi
		expect_eq "$what: $who's connection (roved's ID, rove's ID, handshakes)" \
			"${CONN_BEFORE[$who]}" "$(conn_of "$who")"
	done
}

# hup_roved: SIGHUP to roved, then wait until it counted the reload.
hup_roved() {
	local a r
	a=$(srv_get reloads.applied)
	r=$(srv_get reloads.refused)
	RELOADS_BEFORE="$a $r"
	kill -HUP "$ROVED_PID"
	wait_for 10 "roved to count the reload" reload_counted "$NS_SRV" "$ROVED_SOCK" "$a" "$r" ||
		fail "roved did not count a reload"
}

reload_counted() {
	[ "$(sget "$1" "$2" reloads.applied)" != "$3" ] ||
		[ "$(sget "$1" "$2" reloads.refused)" != "$4" ]
}

# reloads_are WHAT APPLIED REFUSED: roved's counters moved by that much.
reloads_are() {
	local a=${RELOADS_BEFORE% *} r=${RELOADS_BEFORE#* }
	expect_eq "$1: reloads applied, refused" "$((a + $2)) $((r + $3))" \
		"$(srv_get reloads.applied) $(srv_get reloads.refused)"
}

# logged FILE TEXT WHAT: TEXT (fixed string) is in FILE.
logged() {
	if grep -qF -- "$2" "$1"; then ok "$3"; else fail "$3: no '$2' in $(basename "$1")"; fi
}

# exits_refused PID WHAT: the client exits 1, saying it was rejected.
exits_refused() {
	local pid=$1 what=$2 rc
	if ! wait_for 15 "$what to exit" not_running "$pid"; then
		fail "$what still runs"
		return
	fi
	wait "$pid"
	rc=$?
	forget_pid "$pid"
	expect_eq "$what: exit status" 1 "$rc"
}

not_running() { ! kill -0 "$1" 2>/dev/null; }
not_listening() { ! tcp_listening "$1" "$2"; }

# A third client, "extra": forward-only (no TUN), from the laptop's
# namespace, with its own key and StateDir.
EXTRA_PUB=$(genkey "$WORK/configs/keys/extra.key")
EXTRA_STATE=$WORK/configs/state/extra
cat >"$WORK/configs/extra.conf" <<EOF
[Client]
Server = $SRV_OUTER:4433
ServerPublicKey = $(sed -n 's/^ServerPublicKey = //p' "$WORK/configs/rove.conf")
PrivateKeyFile = keys/extra.key
Tun = none
StateDir = state/extra
ControlSocket = $WORK/run-extra/extra.sock
EOF
start_extra() {
	bg "extra$1" "$NS_LAP" "$BUILD/rove" up -c "$WORK/configs/extra.conf" ${ROVE_VERBOSE:+-v}
	EXTRA_PID=$BG_PID
}
EXTRA_SOCK=$WORK/run-extra/extra.sock
extra_up() {
	state_is "$NS_LAP" "$EXTRA_SOCK" 'peers[0].state' established &&
		state_is "$NS_SRV" "$ROVED_SOCK" 'peers[name=extra].state' established
}

# --- 1. A peer added.
start_extra 0
exits_refused "$EXTRA_PID" "extra before it is configured"
logged "$WORK/extra0.log" "rejected by the server" "extra was rejected before the reload"

cat >>"$CONF" <<EOF

[Peer]
Name = extra
PublicKey = $EXTRA_PUB
EOF
conf_set "$CONF" KeepAlive 20
pings_start laptop branch
hup_roved
pings_check "add" laptop branch
reloads_are "add" 1 0
logged "$WORK/roved.log" "reload: peer extra added, address 198.19.77.4/32" "roved logged the peer added, with its pool address"
logged "$WORK/roved.log" "reload: KeepAlive: needs a restart (running: 15; file: 20)" "roved reported KeepAlive as needing a restart"
expect_eq "roved lists the new peer" closed "$(srv_peer extra state)"
start_extra 1
if wait_for 10 "extra to connect" extra_up; then
	ok "extra connected after the reload"
else
	fail "extra does not connect after the reload"
fi
# Its ticket works: a restart resumes.
resumed=$(srv_get tickets.resumed)
stop_pid "$EXTRA_PID"; forget_pid "$EXTRA_PID"
wait_for 5 "roved to see extra go" state_is "$NS_SRV" "$ROVED_SOCK" 'peers[name=extra].state' closed
start_extra 2
wait_for 10 "extra to reconnect" extra_up || fail "extra does not reconnect"
expect_eq "extra's restart resumed its ticket" $((resumed + 1)) "$(srv_get tickets.resumed)"

# --- 2. AllowedIPs changed: 198.19.21.0/24 behind the branch too.
nsx "$NS_BR" ip addr add 198.19.21.1/24 dev eth1 || die "cannot add 198.19.21.1 on the branch"
if nsx "$NS_SRV" ping -n -c 1 -W 1 198.19.21.1 >/dev/null 2>&1; then
	fail "198.19.21.1 answers roved's host before the reload"
else
	ok "198.19.21.1 is not reachable before the reload"
fi
peer_set branch AllowedIPs "198.19.20.0/24, 198.19.21.0/24"
CONN_BEFORE_BR=$(conn_of branch)
pings_start laptop
hup_roved
pings_check "AllowedIPs" laptop
reloads_are "AllowedIPs" 1 0
expect_eq "the branch's connection is the same" "$CONN_BEFORE_BR" "$(conn_of branch)"
expect_eq "roved's status: the branch's allowed_ips" '["198.19.20.0/24","198.19.21.0/24"]' \
	"$(srv_peer branch allowed_ips)"
logged "$WORK/roved.log" "reload: peer branch: AllowedIPs now 198.19.20.0/24, 198.19.21.0/24" "roved logged the AllowedIPs change"
check "roved routes 198.19.21.0/24 into rove0" \
	bash -c "ip -n '$NS_SRV' route show 198.19.21.0/24 | grep -q 'dev rove0'"
check "roved's host -> 198.19.21.1 behind the branch" ping_ok "$NS_SRV" -c 5 -i 0.05 198.19.21.1
peer_set branch AllowedIPs "198.19.20.0/24"
hup_roved
reloads_are "AllowedIPs removed" 1 0
expect_eq "the route into rove0 is gone" "" "$(ip -n "$NS_SRV" route show 198.19.21.0/24)"
expect_eq "the branch's connection is still the same" "$CONN_BEFORE_BR" "$(conn_of branch)"
check "the site behind the branch still answers" ping_ok "$NS_SRV" -c 3 -i 0.05 "$SITE_HOST"

# --- 2b. The laptop's Address changed: its live connection carries the
# new one to it (a second SERVER_CONFIG), and rove puts it on its TUN.
peer_set laptop Address "$TUN_NET4.12/32, $LAP_TUN6/128"
CONN_BEFORE_LAP=$(conn_of laptop)
pings_start branch
hup_roved
pings_check "Address" branch
reloads_are "Address" 1 0
logged "$WORK/roved.log" "reload: peer laptop: Address now $TUN_NET4.12/32, $LAP_TUN6/128" "roved logged the Address change"
if wait_for 5 "the laptop's new address" tun_ready "$NS_LAP" "$TUN_NET4.12"; then
	ok "the laptop's TUN has its new address $TUN_NET4.12"
else
	fail "the laptop's TUN lacks its new address: $(ip -n "$NS_LAP" -br addr show dev rove0)"
fi
expect_eq "the laptop's old address is gone" "" \
	"$(ip -n "$NS_LAP" addr show dev rove0 | grep "inet $LAP_TUN4/")"
expect_eq "rove's status: the laptop's address" "$TUN_NET4.12/24" "$(sget "$NS_LAP" "$LAP_SOCK" 'address[0]')"
check "server -> laptop at $TUN_NET4.12" ping_ok "$NS_SRV" -c 5 -i 0.05 "$TUN_NET4.12"
check "laptop -> branch from $TUN_NET4.12" ping_ok "$NS_LAP" -c 5 -i 0.05 "$BR_TUN4"
expect_eq "the laptop's connection is the same" "$CONN_BEFORE_LAP" "$(conn_of laptop)"
peer_set laptop Address "$LAP_TUN4/32, $LAP_TUN6/128"
hup_roved
reloads_are "Address back" 1 0
wait_for 5 "the laptop's address back" tun_ready "$NS_LAP" "$LAP_TUN4" ||
	fail "the laptop did not get $LAP_TUN4 back"
check "server -> laptop at $LAP_TUN4 again" ping_ok "$NS_SRV" -c 3 -i 0.05 "$LAP_TUN4"
check "laptop -> the LAN behind roved (its route through rove0 restored)" \
	ping_ok "$NS_LAP" -c 3 -i 0.05 "$LAN_HOST"

# --- 3. The laptop's key changed.
NEW_PUB=$(genkey "$WORK/configs/keys/laptop2.key")
OLD_PUB=$(srv_peer laptop public_key)
peer_set laptop PublicKey "$NEW_PUB"
pings_start branch
hup_roved
pings_check "key change" branch
reloads_are "key change" 1 0
exits_refused "$LAP_PID" "the laptop with its old key"
logged "$WORK/laptop.log" "rejected by the server" "the old laptop was told it is refused"
logged "$WORK/roved.log" "reload: peer laptop removed, its connection closed (its PublicKey changed)" "roved logged the old key's removal"
expect_eq "roved's laptop now has the new key" "$NEW_PUB" "$(srv_peer laptop public_key)"
# The old key comes back with its ticket: refused, nothing resumed.
[ -n "$(ls "$WORK/configs/state/laptop" | grep '^session-')" ] && ok "the old laptop holds a ticket" ||
	fail "the old laptop holds no ticket to try"
resumed=$(srv_get tickets.resumed)
start_client laptop
exits_refused "$LAP_PID" "the laptop with its old key and its ticket"
expect_eq "no ticket of the old key resumed" "$resumed" "$(srv_get tickets.resumed)"
cp "$WORK/configs/rove.conf" "$WORK/configs/rove-new.conf"
conf_set "$WORK/configs/rove-new.conf" PrivateKeyFile keys/laptop2.key
conf_set "$WORK/configs/rove-new.conf" StateDir state/laptop2
start_client laptop "$WORK/configs/rove-new.conf"
wait_established laptop || fail "the laptop with its new key does not connect"
check "laptop (new key) -> server" ping_ok "$NS_LAP" -c 5 -i 0.05 "$SRV_TUN4"

# --- 4. A peer removed.
awk '/^\[Peer\]/ { n++ } n < 3' "$CONF" >"$CONF.new" && mv "$CONF.new" "$CONF"
grep -q 'Name = extra' "$CONF" && die "extra is still in $CONF"
[ -n "$(ls "$EXTRA_STATE" | grep '^session-')" ] && ok "extra holds a ticket" ||
	fail "extra holds no ticket to try"
pings_start laptop branch
hup_roved
pings_check "remove" laptop branch
reloads_are "remove" 1 0
exits_refused "$EXTRA_PID" "extra once removed"
logged "$WORK/roved.log" "reload: peer extra removed, its connection closed" "roved logged the removal"
expect_eq "roved no longer lists extra" 1 \
	"$(srv_get peers | "$PY" -c 'import json,sys; print(1 if all(p["name"] != "extra" for p in json.load(sys.stdin)) else 0)')"
resumed=$(srv_get tickets.resumed)
start_extra 3
exits_refused "$EXTRA_PID" "extra with its ticket, once removed"
logged "$WORK/extra3.log" "rejected by the server" "extra was rejected with its ticket"
expect_eq "extra's ticket did not resume" "$resumed" "$(srv_get tickets.resumed)"

# --- 5. Bad configurations change nothing.
cp "$CONF" "$WORK/roved.conf.good"
peer_set branch AllowedIPs "198.19.300.0/24"
printf 'Bogus = 1\n' >>"$CONF"
line_ips=$(grep -n '^AllowedIPs = 198.19.300.0/24' "$CONF" | cut -d: -f1)
line_bogus=$(wc -l <"$CONF")
pings_start laptop branch
hup_roved
pings_check "bad config" laptop branch
reloads_are "bad config" 0 1
logged "$WORK/roved.log" "$CONF:$line_ips: AllowedIPs: '198.19.300.0/24' is not an address or prefix" "roved logged the bad AllowedIPs with FILE:LINE"
logged "$WORK/roved.log" "$CONF:$line_bogus: unknown key 'Bogus' in [Peer]" "roved logged the unknown key with FILE:LINE"
logged "$WORK/roved.log" "reload refused: 2 error(s) in $CONF" "roved said it refused the file"
expect_eq "the branch's AllowedIPs stay" '["198.19.20.0/24"]' "$(srv_peer branch allowed_ips)"
# A new peer wanting the address the pool gave the branch.
cp "$WORK/roved.conf.good" "$CONF"
cat >>"$CONF" <<EOF

[Peer]
Name = extra
PublicKey = $EXTRA_PUB
Address = $BR_TUN4/32
EOF
line_peer=$(grep -n '^Name = extra' "$CONF" | cut -d: -f1)
pings_start laptop branch
hup_roved
pings_check "address in use" laptop branch
reloads_are "address in use" 0 1
logged "$WORK/roved.log" "$CONF:$((line_peer - 1)): peer extra: Address $BR_TUN4/32 is already routed to peer branch (from the address pool)" \
	"roved refused the address the pool gave the branch, with FILE:LINE"
expect_eq "roved still has two peers" '["laptop","branch"]' \
	"$(srv_get peers | "$PY" -c 'import json,sys; print(json.dumps([p["name"] for p in json.load(sys.stdin)], separators=(",", ":")))')"
check "server -> branch $BR_TUN4 still" ping_ok "$NS_SRV" -c 3 -i 0.05 "$BR_TUN4"
cp "$WORK/roved.conf.good" "$CONF"

# --- 6. rove's forwards.
peer_bg lanecho "$NS_LAN" serve "$LAN_HOST:7000" --echo
wait_listen "$NS_LAN" 7000 "the LAN's echo server"
# hup_branch: SIGHUP to the branch's rove; waits for it to count it.
hup_branch() {
	local a r
	a=$(sget "$NS_BR" "$BR_SOCK" reloads.applied)
	r=$(sget "$NS_BR" "$BR_SOCK" reloads.refused)
	BR_RELOADS="$a $r"
	kill -HUP "$BR_PID"
	wait_for 10 "the branch to count the reload" reload_counted "$NS_BR" "$BR_SOCK" "$a" "$r" ||
		fail "the branch did not count a reload"
}
branch_reloads_are() {
	local a=${BR_RELOADS% *} r=${BR_RELOADS#* }
	expect_eq "$1: the branch's reloads applied, refused" "$((a + $2)) $((r + $3))" \
		"$(sget "$NS_BR" "$BR_SOCK" reloads.applied) $(sget "$NS_BR" "$BR_SOCK" reloads.refused)"
}
client_add "$BR_CONF" "LocalForward = 7001 = $LAN_HOST:7000"
CONN_BEFORE_BR=$(conn_of branch)
hup_branch
branch_reloads_are "LocalForward added" 1 0
check "the added LocalForward listens" tcp_listening "$NS_BR" 7001
transfer_ok "$NS_BR" 127.0.0.1:7001 100000 "the added LocalForward"
# A connection through it that outlives the next reload.
READY=$WORK/held.ready GO=$WORK/held.go
bg held "$NS_BR" "$PY" -c '
import os, socket, sys, time
s = socket.create_connection(("127.0.0.1", 7001), timeout=10)
def echo(data):
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("eof")
        got += chunk
    if got != data:
        sys.exit("echo differs")
echo(os.urandom(1000))
open(sys.argv[1], "w").close()
for _ in range(200):
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.05)
echo(os.urandom(50000))
print("echoed after the reload")
' "$READY" "$GO"
HELD_PID=$BG_PID
wait_for 10 "the held connection" test -e "$READY" || fail "the held connection did not start"
sed -i "s/^LocalForward = 7001 = /LocalForward = 7002 = /" "$BR_CONF"
pings_start branch
hup_branch
pings_check "LocalForward replaced" branch
branch_reloads_are "LocalForward replaced" 1 0
touch "$GO"
wait "$HELD_PID"; rc=$?; forget_pid "$HELD_PID"
expect_eq "the connection made through the removed forward kept echoing" "0 echoed after the reload" \
	"$rc $(cat "$WORK/held.log")"
if tcp_listening "$NS_BR" 7001; then fail "the removed LocalForward still listens"; else ok "the removed LocalForward stopped listening"; fi
check "the new LocalForward listens" tcp_listening "$NS_BR" 7002
transfer_ok "$NS_BR" 127.0.0.1:7002 100000 "the new LocalForward"
logged "$WORK/branch.log" "reload: LocalForward 127.0.0.1:7002 listening, to $LAN_HOST:7000" "rove logged the new forward"
logged "$WORK/branch.log" "reload: LocalForward 127.0.0.1:7001 closed" "rove logged the forward removed"
expect_eq "the branch's connection is the same" "$CONN_BEFORE_BR" "$(conn_of branch)"
# A bad file: nothing changes.
client_add "$BR_CONF" "LocalForward = 7003 ="
hup_branch
branch_reloads_are "bad client config" 0 1
logged "$WORK/branch.log" "$BR_CONF:$(wc -l <"$BR_CONF"): LocalForward:" "rove logged the bad line with FILE:LINE"
check "the LocalForward still listens" tcp_listening "$NS_BR" 7002
if tcp_listening "$NS_BR" 7003; then fail "the bad LocalForward listens"; else ok "the bad LocalForward does not listen"; fi

# A RemoteForward added on the branch is asked for on its live
# connection; roved listens until a reload takes the port out of the
# branch's AllowRemoteForward.
peer_bg brecho "$NS_BR" serve 127.0.0.1:7010 --echo
wait_listen "$NS_BR" 7010 "the branch's echo server"
sed -i '/^LocalForward = 7003 =$/d' "$BR_CONF"
client_add "$BR_CONF" "RemoteForward = 2222 = 127.0.0.1:7010"
hup_branch
branch_reloads_are "RemoteForward added" 1 0
if wait_for 10 "roved's listener on port 2222" tcp_listening "$NS_SRV" 2222; then
	ok "roved listens on port 2222 for the branch after its reload"
else
	fail "roved does not listen on port 2222"
fi
transfer_ok "$NS_SRV" 127.0.0.1:2222 100000 "the added RemoteForward"
# Taken out of rove's file: rove takes it back, roved stops listening.
sed -i '/^RemoteForward = 2222 = /d' "$BR_CONF"
hup_branch
branch_reloads_are "RemoteForward removed" 1 0
if wait_for 5 "roved to close port 2222" not_listening "$NS_SRV" 2222; then
	ok "roved stopped listening on port 2222 when rove took it back"
else
	fail "roved still listens on port 2222 after rove took it back"
fi
logged "$WORK/roved.log" "peer branch: remote forward on 127.0.0.1:2222 and [::1]:2222 closed at its request" "roved logged the remote forward taken back"
logged "$WORK/branch.log" "reload: RemoteForward localhost:2222 removed: the server stops listening there" "rove logged the remote forward taken back"
client_add "$BR_CONF" "RemoteForward = 2222 = 127.0.0.1:7010"
hup_branch
branch_reloads_are "RemoteForward added again" 1 0
if wait_for 10 "roved's listener on port 2222" tcp_listening "$NS_SRV" 2222; then
	ok "roved listens on port 2222 again"
else
	fail "roved does not listen on port 2222 again"
fi
# Port 80 instead: roved (unprivileged, without CAP_NET_BIND_SERVICE)
# says it cannot listen there before a restart.
peer_set branch AllowRemoteForward 80
hup_roved
reloads_are "AllowRemoteForward" 1 0
logged "$WORK/roved.log" "reload: an AllowRemoteForward port below 1024 needs CAP_NET_BIND_SERVICE, which roved gave up at start" \
	"roved warned that port 80 needs a restart"
if wait_for 5 "roved to close port 2222" not_listening "$NS_SRV" 2222; then
	ok "roved stopped listening on port 2222"
else
	fail "roved still listens on port 2222"
fi
logged "$WORK/roved.log" "reload: peer branch: remote forward on 127.0.0.1:2222 and [::1]:2222 closed: no longer in AllowRemoteForward" "roved logged the listener closed"
if wait_for 5 "the branch to hear" grep -q "remote forward on localhost:2222 refused by the server: denied" "$WORK/branch.log"; then
	ok "the branch was told its remote forward is denied"
else
	fail "the branch was not told its remote forward is denied"
fi
expect_eq "the branch's connection is still the same" "$CONN_BEFORE_BR" "$(conn_of branch)"
BR_KEY=$(nsx "$NS_BR" "$BUILD/rove" pubkey <"$(conf_path "$BR_CONF" PrivateKeyFile)")
logged "$WORK/branch.log" "remote forward on localhost:2222 refused by the server: denied (not in its AllowRemoteForward for this client's key $BR_KEY)" \
	"the branch's denial names the key the server's rule is for"
# The server allows it again; the branch's reload asks for the denied
# forward again, and roved listens.
peer_set branch AllowRemoteForward 2222
hup_roved
hup_branch
logged "$WORK/branch.log" "reload: RemoteForward localhost:2222 asked for again (the server denied it before)" \
	"the branch's reload asked for the denied remote forward again"
if wait_for 10 "roved's listener on port 2222" tcp_listening "$NS_SRV" 2222; then
	ok "roved listens on port 2222 after the branch asked again"
else
	fail "roved does not listen on port 2222 after the branch asked again"
fi

stop_checked "$BR_PID" branch
stop_checked "$LAP_PID" laptop
stop_checked "$ROVED_PID" roved
e2e_finish
