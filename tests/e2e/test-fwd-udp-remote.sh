#!/usr/bin/env bash
# UDP RemoteForwards (udp/): roved binds a UDP socket for the laptop's
# `RemoteForward = udp/*:6000`, and each source that sends to it is a flow
# that rove relays to a UDP echo server on its side. From the LAN host
# behind roved, 100 datagrams of varying sizes, every answer checked byte
# for byte; iperf3 -u through a UDP RemoteForward (its control connection
# through a TCP one on the same port) and through a UDP LocalForward the
# other way, loss and rate bounded. AllowRemoteForward keeps the
# protocols apart: a port allowed for TCP alone refuses a udp/ forward,
# and the reverse, said in both logs and statuses. After roved restarts,
# rove asks again and the forward carries datagrams again; a reload that
# leaves its port allowed for TCP alone closes it, and so does rove's
# reload that drops a UDP one (its TCP twin on the port stays).
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
command -v iperf3 >/dev/null || die "iperf3 is not installed"
topo_up

ECHO_PORT=7301   # the UDP echo server, on the laptop's loopback
PERF_PORT=5201   # iperf3 servers: on the laptop's loopback and the LAN host
R_ECHO=6000      # udp/*:6000 -> the echo server
R_PERF=6001      # *:6001 and udp/*:6001 -> the laptop's iperf3
TCP_ONLY=6002    # AllowRemoteForward lists it for TCP: udp/ refused
UDP_ONLY=6003    # and this one for UDP: a TCP forward refused
L_PERF=6101      # LocalForward 6101 and udp/6101 -> the LAN host's iperf3
DGRAMS=100
ECHO=$E2E_DIR/udp-echo.py

peer_set laptop AllowRemoteForward \
	"udp/*:$R_ECHO, *:$R_PERF, udp/*:$R_PERF, tcp/$TCP_ONLY, udp/$UDP_ONLY"
peer_set laptop AllowForward "$LAN_HOST/32:$PERF_PORT, udp/$LAN_HOST/32:$PERF_PORT"
client_add "$WORK/configs/rove.conf" \
	"RemoteForward = udp/*:$R_ECHO = 127.0.0.1:$ECHO_PORT" \
	"RemoteForward = *:$R_PERF = 127.0.0.1:$PERF_PORT" \
	"RemoteForward = udp/*:$R_PERF = 127.0.0.1:$PERF_PORT" \
	"RemoteForward = udp/$TCP_ONLY = 127.0.0.1:$ECHO_PORT" \
	"RemoteForward = $UDP_ONLY = 127.0.0.1:$PERF_PORT" \
	"LocalForward = $L_PERF = $LAN_HOST:$PERF_PORT" \
	"LocalForward = udp/$L_PERF = $LAN_HOST:$PERF_PORT"
bg echo "$NS_LAP" "$PY" "$ECHO" serve 127.0.0.1 "$ECHO_PORT"
bg iperf-lap "$NS_LAP" iperf3 -s -B 127.0.0.1 -p "$PERF_PORT"
bg iperf-lan "$NS_LAN" iperf3 -s -B "$LAN_HOST" -p "$PERF_PORT"
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
LAP_KEY=$(nsx "$NS_LAP" "$BUILD/rove" pubkey <"$(conf_path "$WORK/configs/rove.conf" PrivateKeyFile)")

udp_addrs() { nsx "$1" ss -Hlun "sport = :$2" | awk '{ print $4 }' | sort | xargs; }
udp_bound() { [ -n "$(udp_addrs "$1" "$2")" ]; }
# echo_check WHAT COUNT: COUNT datagrams from the LAN host through
# udp/*:R_ECHO, all answered byte for byte.
echo_check() {
	local out
	out=$(nsx "$NS_LAN" timeout 60 "$PY" "$ECHO" check "$SRV_LAN" "$R_ECHO" "$2")
	log "$1: $out"
	expect_eq "$1: answered byte for byte" "$2" "$(jfield "$out" good)"
}
# perf WHAT NS HOST PORT: iperf3 -u for 3 s at 50 Mbit/s; prints the
# received rate and loss, and bounds them.
perf() {
	local out res
	out=$(nsx "$2" timeout 30 iperf3 -u -b 50M -t 3 -l 1200 -c "$3" -p "$4" --json 2>&1)
	res=$("$PY" -c '
import json, sys
d = json.load(sys.stdin)
s = d["end"]["sum"]
got = s["packets"] - s["lost_packets"]
print(s["packets"], s["lost_packets"], "%.1f" % (got * 1200 * 8 / s["seconds"] / 1e6))
' <<<"$out" 2>/dev/null) || { fail "$1: iperf3 failed: $(tail -c 400 <<<"$out")"; return; }
	read -r pkts lost mbps <<<"$res"
	log "$1: $pkts datagrams, $lost lost, $mbps Mbit/s delivered"
	if [ "$pkts" -gt 0 ] && [ $(((pkts - lost) * 100 / pkts)) -ge 90 ]; then
		ok "$1: $((pkts - lost)) of $pkts delivered (>= 90%)"
	else
		fail "$1: $((pkts - lost)) of $pkts delivered (< 90%)"
	fi
}

wait_for 10 "roved's udp/$R_ECHO" udp_bound "$NS_SRV" "$R_ECHO" ||
	die "roved does not bind udp/$R_ECHO: $(tail -n 5 "$WORK/roved.log")"
wait_for 10 "the echo server" udp_bound "$NS_LAP" "$ECHO_PORT" || die "no echo server"
expect_eq "udp/*:$R_ECHO: roved binds every address" "0.0.0.0:$R_ECHO [::]:$R_ECHO" \
	"$(udp_addrs "$NS_SRV" "$R_ECHO")"
expect_eq "udp/*:$R_ECHO: no TCP listener" "" "$(nsx "$NS_SRV" ss -Hltn "sport = :$R_ECHO")"
logged "$WORK/roved.log" "peer laptop: remote forward listening on udp/0.0.0.0:$R_ECHO and [::]:$R_ECHO" \
	"roved logs the UDP listener"
logged "$WORK/laptop.log" "remote forward: the server listens on udp/*:$R_ECHO for 127.0.0.1:$ECHO_PORT" \
	"rove logs the UDP remote forward"

# --- 1. 100 datagrams from one source: one flow each side, all echoed.
echo_check "udp/*:$R_ECHO from the LAN host" "$DGRAMS"
expect_eq "roved's UDP flows opened" 1 "$(srv_uc opened)"
expect_eq "rove's UDP flows opened" 1 "$(lap_uc opened)"
expect_eq "roved's UDP flows refused" 0 "$(srv_uc refused)"
expect_eq "rove's UDP flows refused" 0 "$(lap_uc refused)"

# --- 2. Policy: each protocol its own allowance.
logged "$WORK/laptop.log" \
	"remote forward on udp/localhost:$TCP_ONLY refused by the server: denied (not in its AllowRemoteForward for this client's key $LAP_KEY)" \
	"rove: udp/$TCP_ONLY (TCP allowed) denied"
logged "$WORK/roved.log" \
	"peer laptop: remote forward on udp/localhost:$TCP_ONLY denied by AllowRemoteForward" \
	"roved: udp/$TCP_ONLY denied"
logged "$WORK/laptop.log" \
	"remote forward on localhost:$UDP_ONLY refused by the server: denied (not in its AllowRemoteForward for this client's key $LAP_KEY)" \
	"rove: TCP $UDP_ONLY (UDP allowed) denied"
# Once each, by now: one request each on this connection.
expect_eq "rove logs udp/$TCP_ONLY's refusal once" 1 \
	"$(grep -c "remote forward on udp/localhost:$TCP_ONLY refused by the server: denied" "$WORK/laptop.log")"
expect_eq "rove logs $UDP_ONLY's refusal once" 1 \
	"$(grep -c "remote forward on localhost:$UDP_ONLY refused by the server: denied" "$WORK/laptop.log")"
expect_eq "roved logs the refusals once each" 2 \
	"$(grep -c "peer laptop: remote forward on \(udp/\)\?localhost:600[23] denied by AllowRemoteForward" "$WORK/roved.log")"
expect_eq "port $TCP_ONLY: nothing bound" "" \
	"$(udp_addrs "$NS_SRV" "$TCP_ONLY")$(nsx "$NS_SRV" ss -Hltn "sport = :$TCP_ONLY")"
expect_eq "port $UDP_ONLY: nothing bound" "" \
	"$(udp_addrs "$NS_SRV" "$UDP_ONLY")$(nsx "$NS_SRV" ss -Hltn "sport = :$UDP_ONLY")"
expect_eq "roved status: the remote forwards denied" \
	"remote udp:localhost:$TCP_ONLY remote:localhost:$UDP_ONLY" \
	"$(status "$NS_SRV" "$ROVED_SOCK" | "$PY" -c '
import json, sys
doc = json.load(sys.stdin)
p = [x for x in doc["peers"] if x.get("name") == "laptop"][0]
print(" ".join(sorted(l["kind"] + ":" + l["bind"] for l in p["listeners"]
                      if l["state"] == "denied")))
')"
T=$(text "$NS_LAP" "$LAP_SOCK")
has "rove status: the UDP remote forward" "$T" \
	"    remote udp server *:$R_ECHO -> 127.0.0.1:$ECHO_PORT: listening"
has "rove status: udp/$TCP_ONLY denied" "$T" \
	"    remote udp server localhost:$TCP_ONLY -> 127.0.0.1:$ECHO_PORT: denied"
has "rove status: TCP $UDP_ONLY denied" "$T" \
	"    remote server localhost:$UDP_ONLY -> 127.0.0.1:$PERF_PORT: denied"
T=$(text "$NS_SRV" "$ROVED_SOCK" --peer laptop)
has "roved status: the UDP listener" "$T" \
	"    remote udp 0.0.0.0:$R_ECHO and [::]:$R_ECHO: listening"
has "roved status: udp/$TCP_ONLY denied" "$T" "    remote udp localhost:$TCP_ONLY: denied"

# --- 3. iperf3 -u both ways.
wait_for 10 "roved's udp/$R_PERF" udp_bound "$NS_SRV" "$R_PERF" || die "no udp/$R_PERF"
wait_listen "$NS_SRV" "$R_PERF" "roved's RemoteForward"
wait_listen "$NS_LAP" "$PERF_PORT" "the laptop's iperf3"
wait_listen "$NS_LAN" "$PERF_PORT" "the LAN host's iperf3"
perf "iperf3 -u through RemoteForward udp/*:$R_PERF" "$NS_LAN" "$SRV_LAN" "$R_PERF"
perf "iperf3 -u through LocalForward udp/$L_PERF" "$NS_LAP" 127.0.0.1 "$L_PERF"

# --- 4. roved restarts: rove asks again, the forward carries on.
stop_pids "$ROVED_PID"
start_roved
wait_established laptop || die "laptop's tunnel does not come back"
wait_for 15 "roved's udp/$R_ECHO again" udp_bound "$NS_SRV" "$R_ECHO" ||
	die "roved does not bind udp/$R_ECHO after the reconnect"
echo_check "udp/*:$R_ECHO after the reconnect" 20
expect_eq "roved's UDP flows opened (since its restart)" 1 "$(srv_uc opened)"
expect_eq "roved's UDP flows refused" 0 "$(srv_uc refused)"
expect_eq "rove's UDP flows refused" 0 "$(lap_uc refused)"

# --- 5. A reload that allows port R_ECHO for TCP alone closes the UDP
# socket (a TCP entry never keeps UDP open) and tells rove.
peer_set laptop AllowRemoteForward \
	"*:$R_ECHO, *:$R_PERF, udp/*:$R_PERF, tcp/$TCP_ONLY, udp/$UDP_ONLY"
kill -HUP "$ROVED_PID"
logged "$WORK/roved.log" \
	"reload: peer laptop: remote forward on udp/0.0.0.0:$R_ECHO and [::]:$R_ECHO closed: no longer in AllowRemoteForward" \
	"roved closes udp/$R_ECHO on reload"
logged "$WORK/laptop.log" "remote forward on udp/*:$R_ECHO refused by the server: denied" \
	"rove hears that udp/$R_ECHO is denied now"
expect_eq "udp/$R_ECHO after the reload" "" "$(udp_addrs "$NS_SRV" "$R_ECHO")"
expect_eq "udp/$R_PERF after the reload" "0.0.0.0:$R_PERF [::]:$R_PERF" \
	"$(udp_addrs "$NS_SRV" "$R_PERF")"

# --- 6. rove's reload drops its udp/*:R_PERF: it takes it back, and the
# TCP forward on the same port stays.
sed -i "/^RemoteForward = udp\/\*:$R_PERF /d" "$WORK/configs/rove.conf"
kill -HUP "$LAP_PID"
logged "$WORK/roved.log" \
	"peer laptop: remote forward on udp/0.0.0.0:$R_PERF and [::]:$R_PERF closed at its request" \
	"roved closes udp/$R_PERF at rove's request"
expect_eq "udp/$R_PERF after rove's reload" "" "$(udp_addrs "$NS_SRV" "$R_PERF")"
wait_listen "$NS_SRV" "$R_PERF" "TCP $R_PERF after rove's reload"
fwd_finish
