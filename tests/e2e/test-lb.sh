#!/usr/bin/env bash
# Two roved instances behind a connection-ID-routing balancer (nftables in
# a router namespace). They share one service address, one server key and
# one KeyDir, and differ only in ServerID, which every connection ID they
# issue carries (QUIC-LB layout, docs/SCALING.md). The balancer marks each
# UDP datagram by the server ID it reads from the destination CID (short
# and long headers) and sends a client's first Initial, whose CID the
# client made up, by a hash of its source; policy routing takes each mark
# to its backend. Checked:
#   - the client's session stays on its server across NAT rebindings (the
#     balancer masquerades with random ports; conntrack -F gives each
#     flush a new outer port): every datagram after the first flight is
#     routed by server ID, none by hash, and the other server never sees
#     the client;
#   - the server is killed and the balancer's health check sends its
#     server ID and the hash to the other: the client's next packet draws
#     a stateless reset from the survivor (same reset key), and it resumes
#     there with 0-RTT on the ticket the dead server issued (same ticket
#     key; the ticket names its issuer and peer).
#
#   +-- $NS_C ---------+     +-- $NS_B (balancer) ------------+
#   | rove (laptop)    |     | bc 198.18.50.1                 |
#   | eth0 198.18.50.2-|-----|  mark by CID server ID / hash  |
#   +------------------+     |  masquerade random to backends |
#                            | b1 198.18.51.1   b2 198.18.52.1|
#                            +-----|-----------------|--------+
#   +-- $NS_1 (ServerID 01) -------+   +-- $NS_2 (ServerID 02) -------+
#   | eth0 198.18.51.2, lo VIP     |   | eth0 198.18.52.2, lo VIP     |
#   | roved, rove0 198.19.77.1     |   | roved, rove0 198.19.77.1     |
#   +------------------------------+   +------------------------------+
# VIP 198.18.53.1:4433 is the service address both listen on.
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
command -v conntrack >/dev/null || die "conntrack is not installed"

NS_C=rove-$$-lbc
NS_B=rove-$$-lbb
NS_1=rove-$$-lb1
NS_2=rove-$$-lb2
VIP=198.18.53.1
CL=198.18.50.2
PASSED=0

pass() { ok "$*"; PASSED=$((PASSED + 1)); }
failc() { fail "$*"; }
expect() { if [ "$2" = "$3" ]; then pass "$1 = $3"; else failc "$1: expected '$2', got '$3'"; fi; }
expect_ge() {
	if [ -n "$2" ] && [ "$2" -ge "$3" ] 2>/dev/null; then pass "$1: $2 >= $3"
	else failc "$1: $2, expected >= $3"; fi
}

for ns in "$NS_C" "$NS_B" "$NS_1" "$NS_2"; do
	ns_add "$ns"
	nsx "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
done
veth "$NS_C" eth0 "$NS_B" bc
veth "$NS_B" b1 "$NS_1" eth0
veth "$NS_B" b2 "$NS_2" eth0
ip -n "$NS_C" addr add "$CL/24" dev eth0
ip -n "$NS_C" route add default via 198.18.50.1
ip -n "$NS_B" addr add 198.18.50.1/24 dev bc
ip -n "$NS_B" addr add 198.18.51.1/24 dev b1
ip -n "$NS_B" addr add 198.18.52.1/24 dev b2
nsx "$NS_B" sysctl -qw net.ipv4.ip_forward=1
for i in 1 2; do
	ns=$NS_1; [ "$i" = 2 ] && ns=$NS_2
	ip -n "$ns" addr add "198.18.5$i.2/24" dev eth0
	ip -n "$ns" addr add "$VIP/32" dev lo
	ip -n "$ns" route add default via "198.18.5$i.1"
	# Mark i (set by the rules below) routes the service address to
	# backend i; an unmarked datagram to it has no route.
	ip -n "$NS_B" rule add fwmark "$i" lookup "10$i"
	ip -n "$NS_B" route add "$VIP/32" via "198.18.5$i.2" table "10$i"
done
ip -n "$NS_B" route add blackhole "$VIP/32"

# lb_rules SID1_MARK SID2_MARK HASH_MOD: the balancer's ruleset. The UDP
# payload starts at bit 64 of the transport header. Short header: first
# bit 0, the DCID from octet 1; long header: first bit 1, DCID length at
# octet 5, the DCID from octet 6. A rove CID is 16 octets, its first 0x0f
# (QUIC-LB config 0, self-encoded length 15), then the server ID.
lb_rules() {
	local hash="jhash ip saddr . udp sport mod 2 offset 1"
	[ "$3" = 1 ] && hash="2"
	nsx "$NS_B" nft -f - <<-EOF || die "cannot load the balancer's rules"
	flush ruleset
	table ip lb {
		counter by_sid1 {}
		counter by_sid2 {}
		counter by_hash {}
		chain pre {
			type filter hook prerouting priority mangle; policy accept;
			ip daddr $VIP udp dport 4433 jump quic
		}
		chain quic {
			@th,64,1 0 @th,72,8 0x0f @th,80,8 0x01 meta mark set $1 counter name by_sid1 accept
			@th,64,1 0 @th,72,8 0x0f @th,80,8 0x02 meta mark set $2 counter name by_sid2 accept
			@th,64,1 1 @th,104,8 16 @th,112,8 0x0f @th,120,8 0x01 meta mark set $1 counter name by_sid1 accept
			@th,64,1 1 @th,104,8 16 @th,112,8 0x0f @th,120,8 0x02 meta mark set $2 counter name by_sid2 accept
			meta mark set $hash counter name by_hash
		}
		chain post {
			type nat hook postrouting priority srcnat; policy accept;
			oifname { "b1", "b2" } masquerade random
		}
	}
	EOF
}
lb_rules 1 2 0
# counter NAME: packets the balancer's counter NAME has seen.
counter() {
	nsx "$NS_B" nft list counter ip lb "$1" | sed -n 's/.*packets \([0-9]*\).*/\1/p'
}

wait_for 10 "backends reachable from the client" \
	sh -c "ip netns exec $NS_C ping -c1 -W1 198.18.51.2 >/dev/null && ip netns exec $NS_C ping -c1 -W1 198.18.52.2 >/dev/null" ||
	die "the balancer does not route"

# Both servers: the example roved.conf on the service address, with the
# same key and one KeyDir; each its own StateDir, socket and ServerID.
C=$WORK/configs
for i in 1 2; do
	sed -e "s/^Listen = .*/Listen = $VIP:4433/" \
		-e "s|^StateDir = .*|StateDir = $WORK/state$i\nKeyDir = $WORK/keys\nServerID = 0$i|" \
		-e "s|^ControlSocket = .*|ControlSocket = $WORK/run$i/roved.sock|" \
		"$C/roved.conf" >"$C/roved$i.conf"
done
sed -i -e "s/^Server = .*/Server = $VIP:4433/" -e 's/^KeepAlive = .*/KeepAlive = 1/' "$C/rove.conf"
SOCK1=$WORK/run1/roved.sock
SOCK2=$WORK/run2/roved.sock
bg roved1 "$NS_1" "$BUILD/roved" -f -c "$C/roved1.conf"
PID1=$BG_PID
bg roved2 "$NS_2" "$BUILD/roved" -f -c "$C/roved2.conf"
PID2=$BG_PID
wait_for 10 "roved 1" status_ok "$NS_1" "$SOCK1" || die "roved 1 did not start"
wait_for 10 "roved 2" status_ok "$NS_2" "$SOCK2" || die "roved 2 did not start"
for f in reset.key ticket.key token.key; do
	expect "KeyDir's $f, StateDirs' $f" "yes no no" "$(for d in keys state1 state2; do
		[ -e "$WORK/$d/$f" ] && printf yes || printf no; [ $d = state2 ] || printf ' '; done)"
done

NS_LAP=$NS_C
start_client laptop "$C/rove.conf"
cget() { sget "$NS_LAP" "$LAP_SOCK" "peers[0].$1" 2>/dev/null; }
# on N PATH: the laptop's PATH in roved N's status.
on() {
	local ns=$NS_1 sock=$SOCK1
	[ "$1" = 2 ] && ns=$NS_2 sock=$SOCK2
	sget "$ns" "$sock" "peers[name=laptop].$2" 2>/dev/null
}
wait_for 15 "the laptop's tunnel" state_is "$NS_C" "$LAP_SOCK" 'peers[0].state' established ||
	die "the laptop does not connect"
if [ "$(on 1 state)" = established ]; then HOME_ID=1 OTHER=2; else HOME_ID=2 OTHER=1; fi
expect "the laptop's server holds it" established "$(on $HOME_ID state)"
expect "the other server's view of the laptop" closed "$(on $OTHER state)"
log "the Initial's hash chose roved $HOME_ID"
have_ticket() { compgen -G "$C/state/laptop/session-*" >/dev/null; }
wait_for 10 "a session ticket" have_ticket || failc "no session ticket"
hashed_before=$(counter by_hash)

# NAT rebindings: 5 flushes, a ping through the tunnel every 50 ms.
bg ping "$NS_C" ping -n -i 0.05 -c 100 -W 1 198.19.77.1
PING=$BG_PID
for ((i = 0; i < 5; i++)); do
	sleep 0.8
	nsx "$NS_B" conntrack -F >/dev/null 2>&1
done
wait "$PING"
forget_pid "$PING"
loss=$(sed -n 's/.* \([0-9.]*\)% packet loss.*/\1/p' "$WORK/ping.log")
log "ping during the rebindings: $loss% lost"
expect_ge "rebinds seen by roved $HOME_ID" "$(on $HOME_ID rebinds)" 5
expect "roved $HOME_ID's handshakes with the laptop" 1 "$(on $HOME_ID handshakes)"
expect "the laptop's reconnects" 0 "$(cget reconnects)"
expect "datagrams routed by hash after the first flight" "$hashed_before" "$(counter by_hash)"
expect_ge "datagrams routed by roved $HOME_ID's server ID" "$(counter by_sid$HOME_ID)" 100
expect "datagrams routed by the other server ID" 0 "$(counter by_sid$OTHER)"
expect "the other server's handshakes with the laptop" 0 "$(on $OTHER handshakes)"

# The health check finds the laptop's server dead: its server ID and every
# new flow go to the survivor, and old mappings are forgotten.
if [ "$HOME_ID" = 1 ]; then kill -KILL "$PID1"; forget_pid "$PID1"; lb_rules 2 2 1
else kill -KILL "$PID2"; forget_pid "$PID2"; lb_rules 1 1 1; fi
nsx "$NS_B" conntrack -F >/dev/null 2>&1
t0=$(date +%s%N)
bg ping2 "$NS_C" ping -n -i 0.05 -c 60 -W 1 198.19.77.1
PING2=$BG_PID
wait_for 15 "the laptop on roved $OTHER" sh -c "[ \"\$(ip netns exec $NS_C $BUILD/rove status -s $LAP_SOCK --json | $PY $E2E_DIR/jpath.py 'peers[0].handshakes')\" = 2 ]" ||
	failc "the laptop did not reconnect"
log "back $((($(date +%s%N) - t0) / 1000000)) ms after the failover"
expect "roved $OTHER's view of the laptop" established "$(on $OTHER state)"
expect "stateless resets the laptop received" 1 "$(cget stateless_resets)"
expect "the laptop's 0-RTT attempts" 1 "$(cget zero_rtt.attempted)"
expect "the laptop's 0-RTT accepted" 1 "$(cget zero_rtt.accepted)"
expect "roved $OTHER: connections with 0-RTT accepted" 1 "$(on $OTHER zero_rtt.accepted)"
expect "roved $OTHER: resumptions of another member's tickets" 1 \
	"$(sget "$([ $OTHER = 1 ] && echo "$NS_1" || echo "$NS_2")" "$([ $OTHER = 1 ] && echo "$SOCK1" || echo "$SOCK2")" tickets.group_resumed)"
wait "$PING2"
forget_pid "$PING2"
# 60 pings at 50 ms; the move costs the few sent before the reset came.
expect_ge "pings answered across the failover (of 60)" \
	"$(sed -n 's/.* \([0-9]*\) received.*/\1/p' "$WORK/ping2.log")" 50

printf '%d passed, %d failed\n' "$PASSED" "$E2E_FAILED"
e2e_finish
