#!/usr/bin/env bash
# e2e: light
# TLS over TCP through an HTTP proxy (Proxy = http://user:password@...):
# squid, configured as a corporate proxy (CONNECT to port 443 only, Basic
# authentication from a generated password file), is the laptop's only way
# out; nftables drops everything else it sends. The session comes up
# through it, carries pings and a 4 MiB forward each way with matching
# sha256; a wrong password gives the 407 line and the long back-off; the
# password appears in no log, status or -T output; Proxy = env with
# https_proxy set; Transport = auto falls to the proxy after direct UDP and
# TCP fail, and goes through it at once on the next reconnect.
. "$(dirname "$0")/fwd-lib.sh"
. "$(dirname "$0")/proxy-lib.sh"
fwd_init "$@"
command -v squid >/dev/null || die "squid is not installed (scripts/deps.sh)"
e2e_transport tcp
topo_up
proxy_ns_up

PX_USER=alice
PX_PASS='s3cret-Pw'
L_PORT=7001
T_PORT=7101
squid_start "$PX_USER" "$PX_PASS"
log "$(squid -v | head -n1)"
peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
conf=$WORK/configs/rove.conf
cp "$conf" "$WORK/configs/base.conf"
client_add "$conf" "LocalForward = $L_PORT = $LAN_HOST:$T_PORT" \
	"MetricsListen = 127.0.0.1:9464" \
	"Proxy = http://$PX_USER:$PX_PASS@$PX_ADDR:$SQUID_PORT"
laptop_lockdown

# -T writes the password masked.
t=$(nsx "$NS_LAP" "$BUILD/rove" up -T -c "$conf" | grep '^Proxy')
expect_eq "rove -T: Proxy" "Proxy = http://$PX_USER:***@$PX_ADDR:$SQUID_PORT" "$t"

start_roved
lap_start laptop-http "$conf"
wait_established laptop || die "the tunnel does not come up through squid"
expect_eq "rove: transport" tcp "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].transport')"
expect_eq "rove: proxy" "http://$PX_ADDR:$SQUID_PORT" "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].proxy')"
expect_eq "rove: via_proxy" true "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].via_proxy')"
expect_eq "roved: the laptop comes from the proxy" "$PX_ADDR" \
	"$(srv_get 'peers[name=laptop].remote' | sed 's/:[0-9]*$//')"
check "laptop -> server $SRV_TUN4 through the tunnel" ping_ok "$NS_LAP" -c 20 -i 0.05 "$SRV_TUN4"
check "laptop -> LAN host $LAN_HOST" ping_ok "$NS_LAP" -c 10 -i 0.05 "$LAN_HOST"
forward_4m http
check "the laptop sent nothing straight to the server" [ "$(to_server_dropped)" = 0 ]
txt=$(nsx "$NS_LAP" "$BUILD/rove" status -s "$LAP_SOCK")
check "status: proxy line" grep -qF "proxy: http://$PX_ADDR:$SQUID_PORT (the session goes through it)" <<<"$txt"
metrics=$(nsx "$NS_LAP" "$PY" -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:9464/metrics", timeout=5).read().decode())')
check "metrics answered" grep -q '^rove_peer_connected' <<<"$metrics"
check "no password in the status or metrics" bash -c '! grep -qF -- "$1" <<<"$2"' - "$PX_PASS" \
	"$txt$(status "$NS_LAP" "$LAP_SOCK")$metrics"
stop_checked "$LAP_PID" laptop-http
# squid logs a tunnel once it is closed.
wait_for 5 "squid's log of the CONNECT to $SRV_OUTER:443" \
	grep -q "CONNECT $SRV_OUTER:443 $PX_USER" "$WORK/squid/access.log" ||
	fail "squid did not log the CONNECT"

# A wrong password: squid answers 407; rove says so and waits the longest
# back-off rather than asking again at once.
cp "$WORK/configs/base.conf" "$WORK/configs/wrong.conf"
client_add "$WORK/configs/wrong.conf" "Proxy = http://$PX_USER:wrong-Pw@$PX_ADDR:$SQUID_PORT"
lap_start laptop-wrong "$WORK/configs/wrong.conf"
refused_with_backoff laptop-wrong 407 "cannot connect to $SRV_OUTER:443 (TLS over TCP): proxy $PX_ADDR:$SQUID_PORT refused CONNECT: HTTP/1.1 407 Proxy Authentication Required (wrong user name or password?)"
stop_checked "$LAP_PID" laptop-wrong

# Proxy = env, https_proxy set (no_proxy naming other hosts).
cp "$WORK/configs/base.conf" "$WORK/configs/env.conf"
client_add "$WORK/configs/env.conf" "LocalForward = $L_PORT = $LAN_HOST:$T_PORT" "Proxy = env"
lap_start laptop-env "$WORK/configs/env.conf" \
	https_proxy="http://$PX_USER:$PX_PASS@$PX_ADDR:$SQUID_PORT/" \
	no_proxy="localhost,.example.com,10.0.0.0/8"
wait_established laptop || fail "Proxy = env: no tunnel through squid"
check "Proxy = env: the choice logged" log_has "$WORK/laptop-env.log" \
	"Proxy = env: http://$PX_ADDR:$SQUID_PORT from https_proxy"
expect_eq "Proxy = env: via_proxy" true "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].via_proxy')"
check "Proxy = env: ping through the tunnel" ping_ok "$NS_LAP" -c 10 -i 0.05 "$SRV_TUN4"
stop_checked "$LAP_PID" laptop-env

# Transport = auto: UDP and direct TCP are dropped, so the proxy is used.
cp "$WORK/configs/base.conf" "$WORK/configs/auto.conf"
sed -i 's/^Transport = .*/Transport = auto/' "$WORK/configs/auto.conf"
client_add "$WORK/configs/auto.conf" "Proxy = http://$PX_USER:$PX_PASS@$PX_ADDR:$SQUID_PORT"
t0=$(date +%s%N)
lap_start laptop-auto "$WORK/configs/auto.conf"
wait_for 20 "auto: established through the proxy" \
	state_is "$NS_LAP" "$LAP_SOCK" 'peers[0].via_proxy' true ||
	fail "Transport = auto does not fall to the proxy"
log "auto: through the proxy after $((($(date +%s%N) - t0) / 1000000)) ms"
expect_eq "auto: transport" tcp "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].transport')"
check "auto: direct TCP tried first" log_has "$WORK/laptop-auto.log" \
	"TCP to $SRV_OUTER:443: "
check "auto: ping through the tunnel" ping_ok "$NS_LAP" -c 10 -i 0.05 "$SRV_TUN4"

# The proxy worked: after roved restarts, the reconnect's TLS over TCP
# goes through it at once, without waiting for direct TCP again; squid's
# 503 while roved is down does not make rove give up on it.
stop_checked "$ROVED_PID" roved
wait_for 15 "squid's 503 while roved is down" log_has "$WORK/laptop-auto.log" \
	"proxy $PX_ADDR:$SQUID_PORT refused CONNECT: HTTP/1.1 503 Service Unavailable" ||
	fail "no 503 while roved was down"
start_roved
t0=$(date +%s%N)
wait_established laptop || fail "auto: no session after roved restarted"
log "auto: back through the proxy $((($(date +%s%N) - t0) / 1000000)) ms after roved restarted"
check "auto: the reconnect goes through the proxy at once" log_has "$WORK/laptop-auto.log" \
	"no answer over UDP: trying $SRV_OUTER:443 (TLS over TCP through http://$PX_ADDR:$SQUID_PORT) too"
expect_eq "auto: direct TCP tried once in all" 1 "$(grep -c "TCP to $SRV_OUTER:443: " "$WORK/laptop-auto.log")"
expect_eq "auto: via_proxy after the reconnect" true "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].via_proxy')"
check "auto: ping after the reconnect" ping_ok "$NS_LAP" -c 10 -i 0.05 "$SRV_TUN4"

for f in "$WORK"/laptop*.log "$WORK/roved.log"; do
	check "no password in $(basename "$f")" bash -c '! grep -qE -- "s3cret-Pw|wrong-Pw" "$1"' - "$f"
done
fwd_finish laptop-auto="$LAP_PID"
