#!/usr/bin/env bash
# Port 443 shared with a website, as the README's "Sharing port 443 with a
# website" sets it up, with Debian's HAProxy and nginx:
#
#   198.18.1.1 TCP 443: HAProxy in TCP mode, routing by the ClientHello's
#                       SNI: rove.example -> roved's ListenTCP
#                       127.0.0.1:4443, anything else -> nginx
#                       127.0.0.1:8443 (an HTTPS site, self-signed)
#   198.18.1.1 UDP 443: roved (QUIC)
#   198.18.1.5 TCP 443: nginx itself; UDP 443: roved (QUIC)
#
#  - curl gets the site's page, exactly, through HAProxy and from nginx
#    on its own address;
#  - rove with Transport = tcp and Server = rove.example:443 (a name:
#    it is the SNI) connects through HAProxy, and a ping goes through;
#    roved sees HAProxy's address (127.0.0.1) as the peer's;
#  - the same with the server given by address and ServerName =
#    rove.example;
#  - given by address without ServerName, rove sends no SNI, HAProxy
#    hands it to nginx, which refuses rove's ALPN; rove's warning names
#    the likely cause (ServerName);
#  - rove with Transport = quic to 198.18.1.5:443 works while nginx holds
#    TCP 443 there.
# e2e: light
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
for p in haproxy nginx openssl curl; do
	command -v "$p" >/dev/null || die "$p is not installed (scripts/deps.sh installs it)"
done
topo_up

SRV_WEB=198.18.1.5
SITE=www.example
ROVE_NAME=rove.example
ip -n "$NS_SRV" addr add "$SRV_WEB/24" dev eth0 || die "cannot add $SRV_WEB"
netns_etc "$NS_LAP" hosts "127.0.0.1 localhost
$SRV_OUTER $ROVE_NAME"

# The website: nginx with a self-signed certificate, in a directory of its
# own (the worker runs as nobody and reads only the page).
WEB=$WORK/web
mkdir -p "$WEB/www" "$WEB/tmp" && chmod 755 "$WEB" "$WEB/www" ||
	die "cannot make $WEB"
PAGE="the site on port 443 next to rove, $$"
printf '%s\n' "$PAGE" >"$WEB/www/index.html"
chmod 644 "$WEB/www/index.html"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
	-keyout "$WEB/site.key" -out "$WEB/site.crt" -days 2 -subj "/CN=$SITE" \
	-addext "subjectAltName=DNS:$SITE" >"$WORK/openssl.log" 2>&1 ||
	die "openssl cannot make the site's certificate"
cat >"$WEB/nginx.conf" <<EOF
worker_processes 1;
error_log $WEB/error.log;
events { worker_connections 64; }
http {
	access_log $WEB/access.log;
	client_body_temp_path $WEB/tmp/body;
	proxy_temp_path $WEB/tmp/proxy;
	fastcgi_temp_path $WEB/tmp/fastcgi;
	uwsgi_temp_path $WEB/tmp/uwsgi;
	scgi_temp_path $WEB/tmp/scgi;
	server {
		listen 127.0.0.1:8443 ssl;
		listen $SRV_WEB:443 ssl;
		server_name $SITE;
		ssl_certificate $WEB/site.crt;
		ssl_certificate_key $WEB/site.key;
		# As Debian's /etc/nginx/nginx.conf has it (1.22's own
		# default lacks TLS 1.3, which is all rove speaks).
		ssl_protocols TLSv1.2 TLSv1.3;
		root $WEB/www;
	}
}
EOF
cat >"$WEB/haproxy.cfg" <<EOF
global
	maxconn 256

defaults
	mode tcp
	timeout connect 5s
	# Longer than rove's KeepAlive: an idle session stays.
	timeout client 1h
	timeout server 1h

frontend https
	bind $SRV_OUTER:443
	tcp-request inspect-delay 5s
	tcp-request content accept if { req.ssl_hello_type 1 }
	use_backend rove if { req.ssl_sni -i $ROVE_NAME }
	default_backend web

backend rove
	server roved 127.0.0.1:4443

backend web
	server nginx 127.0.0.1:8443
EOF
log "$(haproxy -v | head -n1)"
log "$(nginx -v 2>&1)"
bg nginx "$NS_SRV" nginx -p "$WEB" -e "$WEB/error.log" -c "$WEB/nginx.conf" \
	-g "daemon off; pid $WEB/nginx.pid;"
NGINX_PID=$BG_PID
bg haproxy "$NS_SRV" haproxy -db -f "$WEB/haproxy.cfg"
HAPROXY_PID=$BG_PID
wait_listen "$NS_SRV" 8443 "nginx"
wait_listen "$NS_SRV" 443 "HAProxy and nginx"

# roved: QUIC on UDP 443 of both addresses, TLS over TCP behind HAProxy.
sed -i -e '/^Listen = /d' -e '/^ListenTCP = /d' "$WORK/configs/roved.conf"
server_set ListenTCP 127.0.0.1:4443
server_set Listen "$SRV_WEB:443"
sed -i "/^\[Server\]/a Listen = $SRV_OUTER:443" "$WORK/configs/roved.conf"
start_roved

page() {
	nsx "$NS_LAP" curl -sS -k --max-time 5 --resolve "$SITE:443:$1" "https://$SITE/" 2>&1
}
expect_eq "curl https://$SITE/ through HAProxy ($SRV_OUTER)" "$PAGE" "$(page "$SRV_OUTER")"
expect_eq "curl https://$SITE/ from nginx on $SRV_WEB" "$PAGE" "$(page "$SRV_WEB")"

lap_conf() {
	local f=$WORK/configs/laptop-$1.conf
	sed -e '/^Server = /d' "$WORK/configs/rove.conf" >"$f"
	shift
	client_add "$f" "Transport = tcp" "$@"
	printf '%s\n' "$f"
}
# laptop_over_443 WHAT CONFIG: rove connects through HAProxy and pings.
laptop_over_443() {
	start_client laptop "$2"
	if wait_established laptop; then
		ok "$1: the session is up through HAProxy"
	else
		fail "$1: no session through HAProxy"
	fi
	expect_eq "$1: transport" tcp "$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].transport' 2>/dev/null)"
	expect_eq "$1: rove's server endpoint" "$SRV_OUTER:443" \
		"$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].remote' 2>/dev/null)"
	expect_eq "$1: the peer's address as roved sees it (HAProxy's)" 127.0.0.1 \
		"$(srv_get 'peers[name=laptop].remote' 2>/dev/null | sed 's/:[0-9]*$//')"
	check "$1: ping through the tunnel" ping_ok "$NS_LAP" -c 5 -i 0.1 "$SRV_TUN4"
	stop_checked "$LAP_PID" laptop
	forget_pid "$LAP_PID"
}

laptop_over_443 "Server = $ROVE_NAME:443" "$(lap_conf name "Server = $ROVE_NAME:443")"
laptop_over_443 "Server = $SRV_OUTER:443, ServerName = $ROVE_NAME" \
	"$(lap_conf sni "Server = $SRV_OUTER:443" "ServerName = $ROVE_NAME")"

# No SNI: HAProxy's default, the website. nginx refuses the handshake
# (no ALPN it knows: alert 120), and rove says where to look.
NOSNI_LINE="cannot connect to $SRV_OUTER:443 (TLS over TCP): TLS alert 120: is it roved that answers there? A proxy that routes by SNI may send rove to a website: see ServerName"
start_client laptop "$(lap_conf nosni "Server = $SRV_OUTER:443")"
if wait_for 5 "rove's report of the website's answer" grep -qF "$NOSNI_LINE" "$WORK/laptop.log"; then
	ok "without SNI: HAProxy sent rove to the website, and rove says so"
else
	fail "without SNI: no line '$NOSNI_LINE'"
fi
expect_eq "without SNI: roved's count of the laptop's handshakes (the two before)" 2 \
	"$(srv_get 'peers[name=laptop].handshakes' 2>/dev/null)"
stop_checked "$LAP_PID" laptop

# QUIC on UDP 443 of the address where nginx holds TCP 443.
sed -i -e '/^Server = /d' "$WORK/configs/rove2.conf"
client_add "$WORK/configs/rove2.conf" "Server = $SRV_WEB:443" "Transport = quic"
start_client branch
wait_established branch || fail "QUIC to $SRV_WEB:443: no session"
expect_eq "QUIC to $SRV_WEB:443: transport" quic "$(sget "$NS_BR" "$BR_SOCK" 'peers[0].transport' 2>/dev/null)"
check "QUIC to $SRV_WEB:443: ping through the tunnel" ping_ok "$NS_BR" -c 5 -i 0.1 "$SRV_TUN4"
expect_eq "curl from nginx on $SRV_WEB while roved has UDP 443" "$PAGE" "$(page "$SRV_WEB")"

stop_pids "$HAPROXY_PID" "$NGINX_PID"
fwd_finish branch
