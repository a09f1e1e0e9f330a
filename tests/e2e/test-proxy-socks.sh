#!/usr/bin/env bash
# e2e: light
# TLS over TCP through a SOCKS5 proxy (Proxy = socks5://...): dante is the
# laptop's only way out; nftables drops everything else it sends. The
# session comes up through it and carries pings and a 4 MiB forward each
# way with matching sha256; a request dante's rules refuse, and one to a
# port where nothing listens, give the documented lines, naming the reply.
# Then dante asks for a user name and password (RFC 1929, checked against
# a passwd file of the proxy's namespace): the right ones carry pings and
# the 4 MiB forward, and never show in status or the log; a wrong
# password gives its line and the long back-off. A proxy that never
# answers is given up at the 10 s deadline.
. "$(dirname "$0")/fwd-lib.sh"
. "$(dirname "$0")/proxy-lib.sh"
fwd_init "$@"
command -v danted >/dev/null || die "danted is not installed (scripts/deps.sh)"
e2e_transport tcp
topo_up
proxy_ns_up

L_PORT=7001
T_PORT=7101
BLOCKED_PORT=8443
CLOSED_PORT=444
dante_start "socks block { from: 0.0.0.0/0 to: $SRV_OUTER/32 port = $BLOCKED_PORT log: connect }"
log "$(danted -v 2>&1 | head -n1)"
peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
conf=$WORK/configs/rove.conf
cp "$conf" "$WORK/configs/base.conf"
client_add "$conf" "LocalForward = $L_PORT = $LAN_HOST:$T_PORT" \
	"Proxy = socks5://$PX_ADDR:$DANTE_PORT"
laptop_lockdown

start_roved
lap_start laptop-socks "$conf"
wait_established laptop || die "the tunnel does not come up through dante"
expect_eq "rove: transport" tcp "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].transport')"
expect_eq "rove: proxy" "socks5://$PX_ADDR:$DANTE_PORT" "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].proxy')"
expect_eq "rove: via_proxy" true "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].via_proxy')"
expect_eq "roved: the laptop comes from the proxy" "$PX_ADDR" \
	"$(srv_get 'peers[name=laptop].remote' | sed 's/:[0-9]*$//')"
check "laptop -> server $SRV_TUN4 through the tunnel" ping_ok "$NS_LAP" -c 20 -i 0.05 "$SRV_TUN4"
check "laptop -> LAN host $LAN_HOST" ping_ok "$NS_LAP" -c 10 -i 0.05 "$LAN_HOST"
forward_4m socks
check "the laptop sent nothing straight to the server" [ "$(to_server_dropped)" = 0 ]
stop_checked "$LAP_PID" laptop-socks

# dante's rules refuse the server's port: reply 2, and the long back-off.
cp "$WORK/configs/base.conf" "$WORK/configs/blocked.conf"
sed -i "s/^ServerTCP = .*/ServerTCP = $SRV_OUTER:$BLOCKED_PORT/" "$WORK/configs/blocked.conf"
client_add "$WORK/configs/blocked.conf" "Proxy = socks5://$PX_ADDR:$DANTE_PORT"
lap_start laptop-blocked "$WORK/configs/blocked.conf"
refused_with_backoff laptop-blocked "refusal by rules" "cannot connect to $SRV_OUTER:$BLOCKED_PORT (TLS over TCP): proxy $PX_ADDR:$DANTE_PORT (SOCKS5) refused CONNECT: connection not allowed by ruleset (reply 2)"
stop_checked "$LAP_PID" laptop-blocked

# Nothing listens on the port: dante says so (reply 5), a passing fault.
cp "$WORK/configs/base.conf" "$WORK/configs/closed.conf"
sed -i "s/^ServerTCP = .*/ServerTCP = $SRV_OUTER:$CLOSED_PORT/" "$WORK/configs/closed.conf"
client_add "$WORK/configs/closed.conf" "Proxy = socks5://$PX_ADDR:$DANTE_PORT"
lap_start laptop-closed "$WORK/configs/closed.conf"
line="cannot connect to $SRV_OUTER:$CLOSED_PORT (TLS over TCP): proxy $PX_ADDR:$DANTE_PORT (SOCKS5) refused CONNECT: connection refused by destination host (reply 5)"
wait_for 15 "the refused line" log_has "$WORK/laptop-closed.log" "$line" ||
	fail "no 'connection refused by destination host' line in rove's log"
stop_checked "$LAP_PID" laptop-closed

# dante again, now asking for a user name and password. The account is
# the proxy namespace's alone: ip netns exec mounts these files over
# /etc/passwd and /etc/shadow for dante, and nothing else sees them.
stop_pid "$DANTE_PID"
forget_pid "$DANTE_PID"
S5_USER=rove-px
S5_PASS=S0cks-pw-42
hash=$(openssl passwd -6 "$S5_PASS") || die "openssl cannot hash the password"
netns_etc "$NS_PX" passwd "root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
$S5_USER:x:64990:65534:rove test:/nonexistent:/usr/sbin/nologin"
netns_etc "$NS_PX" shadow "root:*:20000:0:99999:7:::
nobody:*:20000:0:99999:7:::
$S5_USER:$hash:20000:0:99999:7:::"
chmod 640 "/etc/netns/$NS_PX/shadow"
DANTE_METHOD=username dante_start
cp "$WORK/configs/base.conf" "$WORK/configs/auth.conf"
client_add "$WORK/configs/auth.conf" "LocalForward = $L_PORT = $LAN_HOST:$T_PORT" \
	"Proxy = socks5://$S5_USER:$S5_PASS@$PX_ADDR:$DANTE_PORT"
lap_start laptop-auth "$WORK/configs/auth.conf"
wait_established laptop || die "the tunnel does not come up through dante with a password"
expect_eq "rove: proxy (no credentials)" "socks5://$PX_ADDR:$DANTE_PORT" \
	"$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].proxy')"
check "with a password: laptop -> LAN host $LAN_HOST" ping_ok "$NS_LAP" -c 10 -i 0.05 "$LAN_HOST"
forward_4m socks-auth
txt=$(nsx "$NS_LAP" "$BUILD/rove" status -s "$LAP_SOCK")
check "no password in the status or the log" bash -c '! grep -qF -- "$1" <<<"$2"' - \
	"$S5_PASS" "$txt$(status "$NS_LAP" "$LAP_SOCK")$(cat "$WORK/laptop-auth.log")"
stop_checked "$LAP_PID" laptop-auth

# A wrong password: dante refuses it, rove says so and waits the longest
# back-off.
cp "$WORK/configs/base.conf" "$WORK/configs/auth-wrong.conf"
client_add "$WORK/configs/auth-wrong.conf" \
	"Proxy = socks5://$S5_USER:wrong-Pw@$PX_ADDR:$DANTE_PORT"
lap_start laptop-auth-wrong "$WORK/configs/auth-wrong.conf"
refused_with_backoff laptop-auth-wrong "refused password" "cannot connect to $SRV_OUTER:443 (TLS over TCP): proxy $PX_ADDR:$DANTE_PORT (SOCKS5) refused the user name and password (status 1)"
check "no password in the log" bash -c '! grep -qF -- "wrong-Pw" "$1"' - "$WORK/laptop-auth-wrong.log"
stop_checked "$LAP_PID" laptop-auth-wrong

# A proxy that takes the connection and never answers: the attempt ends
# with the TCP handshake's deadline, 10 s, saying so.
silent_start
cp "$WORK/configs/base.conf" "$WORK/configs/silent.conf"
client_add "$WORK/configs/silent.conf" "Proxy = socks5://$PX_ADDR:$SILENT_PORT"
t0=$(date +%s%N)
lap_start laptop-silent "$WORK/configs/silent.conf"
line="cannot connect to $SRV_OUTER:443 (TLS over TCP): proxy $PX_ADDR:$SILENT_PORT: no answer within 10 s"
wait_for 15 "the timeout line" log_has "$WORK/laptop-silent.log" "$line" ||
	fail "no timeout line in rove's log"
ms=$((($(date +%s%N) - t0) / 1000000))
log "silent proxy: given up after $ms ms"
check "the silent proxy is given up after 9.5 to 13 s (took $ms ms)" \
	bash -c '[ "$1" -ge 9500 ] && [ "$1" -le 13000 ]' - "$ms"
fwd_finish laptop-silent="$LAP_PID"
