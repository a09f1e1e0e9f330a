# The proxies of a restrictive network for the Proxy tests, sourced after
# fwd-lib.sh: a namespace $NS_PX on the outer switch at $PX_ADDR holds
# squid (HTTP CONNECT) or dante (SOCKS5), run from configs generated in
# $WORK, and the laptop's namespace lets out nothing but its tunnel and
# what goes to the proxy.
# shellcheck disable=SC2034
NS_PX=rove-$$-px
PX_ADDR=198.18.1.5
SQUID_PORT=3128
DANTE_PORT=1080
SILENT_PORT=3129

# proxy_ns_up: $NS_PX on the switch.
proxy_ns_up() {
	ns_add "$NS_PX"
	veth "$NS_SW" p-px "$NS_PX" eth0
	ip -n "$NS_SW" link set p-px master br0
	ip -n "$NS_PX" addr add "$PX_ADDR/24" dev eth0
	wait_for 10 "the proxy's namespace reaches the server" \
		nsx "$NS_PX" ping -c 1 -W 1 "$SRV_OUTER" >/dev/null ||
		die "the proxy's namespace does not reach the server"
}

# laptop_lockdown: the laptop's own packets go only to the proxy (and
# into the tunnel, and on loopback): no UDP and no TCP to the server.
laptop_lockdown() {
	nsx "$NS_LAP" nft -f - <<-NFT || die "cannot lock the laptop down"
	table inet rove_px {
		counter to_server { }
		chain out {
			type filter hook output priority 0; policy drop;
			oifname { "lo", "rove0" } accept
			ip daddr $PX_ADDR tcp dport { $SQUID_PORT, $DANTE_PORT, $SILENT_PORT } accept
			ip daddr $SRV_OUTER counter name to_server drop
		}
	}
	NFT
}

# to_server_dropped: packets the lockdown kept from the server.
to_server_dropped() {
	nsx "$NS_LAP" nft -j list counter inet rove_px to_server |
		"$PY" -c 'import json,sys; d=json.load(sys.stdin)["nftables"]; print([o["counter"]["packets"] for o in d if "counter" in o][0])'
}

# squid_start [USER PASSWORD]: squid on $PX_ADDR:$SQUID_PORT allowing
# CONNECT to port 443 only, as a corporate proxy does; with Basic
# authentication by a generated password file when given a user.
squid_start() {
	local d=$WORK/squid auth=""
	mkdir -p "$d"
	if [ $# -eq 2 ]; then
		printf '%s:%s\n' "$1" "$(openssl passwd -apr1 "$2")" >"$d/passwd"
		auth="auth_param basic program /usr/lib/squid/basic_ncsa_auth $d/passwd
auth_param basic realm rove-test
acl authed proxy_auth REQUIRED
http_access deny !authed"
	fi
	cat >"$d/squid.conf" <<-EOF
	http_port $PX_ADDR:$SQUID_PORT
	visible_hostname rove-test-proxy
	cache_effective_user nobody
	pid_filename $d/squid.pid
	cache_log $d/cache.log
	access_log stdio:$d/access.log
	cache deny all
	cache_mem 8 MB
	dns_nameservers 127.0.0.1
	shutdown_lifetime 0 seconds
	acl SSL_ports port 443
	acl CONNECT method CONNECT
	http_access deny !CONNECT
	http_access deny CONNECT !SSL_ports
	$auth
	http_access allow all
	EOF
	chown -R nobody "$d"
	chmod 755 "$d"
	bg squid "$NS_PX" squid -N -f "$d/squid.conf"
	SQUID_PID=$BG_PID
	wait_for 15 "squid listening on $SQUID_PORT" tcp_listening "$NS_PX" "$SQUID_PORT" ||
		die "squid does not start (see squid.log, $d/cache.log)"
}

# dante_start [RULES]: danted on $PX_ADDR:$DANTE_PORT; RULES (socks block
# ... lines) go before the rule that passes the rest. SOCKS requests are
# authenticated by DANTE_METHOD: none (the default), or username (RFC
# 1929, against the passwd and shadow files netns_etc gave $NS_PX: ip
# netns exec mounts them over /etc's for dante alone).
dante_start() {
	local d=$WORK/dante
	mkdir -p "$d"
	cat >"$d/danted.conf" <<-EOF
	logoutput: $d/danted.log
	internal: $PX_ADDR port = $DANTE_PORT
	external: $PX_ADDR
	clientmethod: none
	socksmethod: ${DANTE_METHOD:-none}
	user.privileged: root
	user.unprivileged: nobody
	client pass { from: 198.18.1.0/24 to: 0.0.0.0/0 }
	${1:-}
	socks pass { from: 198.18.1.0/24 to: 0.0.0.0/0 command: connect }
	EOF
	chmod 755 "$d"
	bg dante "$NS_PX" danted -f "$d/danted.conf" -p "$d/danted.pid" -N 1
	DANTE_PID=$BG_PID
	wait_for 15 "danted listening on $DANTE_PORT" tcp_listening "$NS_PX" "$DANTE_PORT" ||
		die "danted does not start (see dante.log)"
}

# refused_with_backoff NAME WHAT LINE: rove's log $WORK/NAME.log gets
# LINE (the proxy's refusal, WHAT for messages), and the back-off after it
# is the long one, at least 15 s: a refusal will not change soon.
refused_with_backoff() {
	local log=$WORK/$1.log ms
	wait_for 15 "the $2 line" log_has "$log" "$3" || fail "no $2 line in rove's log"
	wait_for 5 "the back-off line" grep -q 'reconnecting in' "$log"
	ms=$(grep -o 'reconnecting in [0-9]* ms' "$log" | head -n1 | grep -o '[0-9]*')
	check "a $2 backs off at least 15 s (got ${ms:-none} ms)" [ "${ms:-0}" -ge 15000 ]
}

# silent_start: a "proxy" on $PX_ADDR:$SILENT_PORT that takes connections
# and never answers.
silent_start() {
	bg silent "$NS_PX" "$PY" -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(8)
held = []
end = time.time() + 120
while time.time() < end:
	held.append(s.accept()[0])
' "$PX_ADDR" "$SILENT_PORT"
	wait_for 10 "the silent proxy listening" tcp_listening "$NS_PX" "$SILENT_PORT" ||
		die "the silent proxy does not start"
}

# log_has FILE TEXT: the exact TEXT is in the log FILE.
log_has() { grep -qF -- "$2" "$1"; }

# lap_start NAME CONFIG [VAR=VALUE...]: rove up in the laptop's namespace
# with those environment variables, its log $WORK/NAME.log (a log of its
# own per run, so no process can write into another's); LAP_PID and
# LAP_SOCK as start_client sets them. The previous one must be gone.
lap_start() {
	local name=$1 conf=$2
	shift 2
	LAP_SOCK=$(conf_path "$conf" ControlSocket)
	wait_for 5 "the previous rove's control socket to go" \
		bash -c '! ip netns exec "$1" "$2" status -s "$3" >/dev/null 2>&1' - \
		"$NS_LAP" "$BUILD/rove" "$LAP_SOCK" || die "a previous rove still answers"
	bg "$name" "$NS_LAP" env "$@" "$BUILD/rove" up -f -c "$conf" ${ROVE_VERBOSE:+-v}
	LAP_PID=$BG_PID
}

# forward_4m NAME: 4 MiB each way through the laptop's LocalForward
# $L_PORT to $LAN_HOST:$T_PORT, with matching sha256 both ways.
forward_4m() {
	local out s
	peer_bg "target-$1" "$NS_LAN" serve "$LAN_HOST:$T_PORT" --send 4M \
		--results "$WORK/target-$1.json"
	wait_listen "$NS_LAN" "$T_PORT" "the -L target"
	wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"
	out=$(peer_run "$NS_LAP" 60 connect "127.0.0.1:$L_PORT" --send 4M --timeout 30)
	wait_for 10 "the target's result" has_lines "$WORK/target-$1.json" 1 ||
		fail "$1: the target reported nothing"
	s=$(head -n1 "$WORK/target-$1.json")
	expect_eq "$1: forward: client received" $((4 << 20)) "$(jfield "$out" rx)"
	expect_eq "$1: forward: sha256 client -> target" "$(jfield "$out" tx_sha)" "$(jfield "$s" rx_sha)"
	expect_eq "$1: forward: sha256 target -> client" "$(jfield "$s" tx_sha)" "$(jfield "$out" rx_sha)"
	stop_pids "$BG_PID"
}
