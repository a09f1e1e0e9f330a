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
# The topology is lb-lib.sh's.
# e2e: light
. "$(dirname "$0")/lb-lib.sh"
e2e_init "$@"
command -v conntrack >/dev/null || die "conntrack is not installed"

NS_C=rove-$$-lbc
PASSED=0

pass() { ok "$*"; PASSED=$((PASSED + 1)); }
failc() { fail "$*"; }
expect() { if [ "$2" = "$3" ]; then pass "$1 = $3"; else failc "$1: expected '$2', got '$3'"; fi; }
expect_ge() {
	if [ -n "$2" ] && [ "$2" -ge "$3" ] 2>/dev/null; then pass "$1: $2 >= $3"
	else failc "$1: $2, expected >= $3"; fi
}

ns_add "$NS_C"
lb_topo_up "$NS_C"
lb_rules 1 2 0 nat
C=$WORK/configs
lb_member_confs "$C/roved.conf"
sed -i -e "s/^Server = .*/Server = $LB_VIP:$LB_PORT/" -e 's/^KeepAlive = .*/KeepAlive = 1/' "$C/rove.conf"
lb_start_members
for f in reset.key ticket.key token.key; do
	expect "KeyDir's $f, StateDirs' $f" "yes no no" "$(for d in lb-keys lb-state1 lb-state2; do
		[ -e "$WORK/$d/$f" ] && printf yes || printf no; [ $d = lb-state2 ] || printf ' '; done)"
done

NS_LAP=$NS_C
start_client laptop "$C/rove.conf"
cget() { sget "$NS_LAP" "$LAP_SOCK" "peers[0].$1" 2>/dev/null; }
# on N PATH: the laptop's PATH in member N's status.
on() { sget "$(lb_ns "$1")" "$(lb_sock "$1")" "peers[name=laptop].$2" 2>/dev/null; }
wait_for 15 "the laptop's tunnel" state_is "$NS_C" "$LAP_SOCK" 'peers[0].state' established ||
	die "the laptop does not connect"
if [ "$(on 1 state)" = established ]; then HOME_ID=1 OTHER=2; else HOME_ID=2 OTHER=1; fi
expect "the laptop's server holds it" established "$(on $HOME_ID state)"
expect "the other server's view of the laptop" closed "$(on $OTHER state)"
log "the Initial's hash chose roved $HOME_ID"
have_ticket() { compgen -G "$C/state/laptop/session-*" >/dev/null; }
wait_for 10 "a session ticket" have_ticket || failc "no session ticket"
hashed_before=$(lb_counter by_hash)

# NAT rebindings: 5 flushes, a ping through the tunnel every 50 ms.
bg ping "$NS_C" ping -n -i 0.05 -c 100 -W 1 198.19.77.1
PING=$BG_PID
for ((i = 0; i < 5; i++)); do
	sleep 0.8
	nsx "$LB_NS" conntrack -F >/dev/null 2>&1
done
wait "$PING"
forget_pid "$PING"
loss=$(sed -n 's/.* \([0-9.]*\)% packet loss.*/\1/p' "$WORK/ping.log")
log "ping during the rebindings: $loss% lost"
expect_ge "rebinds seen by roved $HOME_ID" "$(on $HOME_ID rebinds)" 5
expect "roved $HOME_ID's handshakes with the laptop" 1 "$(on $HOME_ID handshakes)"
expect "the laptop's reconnects" 0 "$(cget reconnects)"
expect "datagrams routed by hash after the first flight" "$hashed_before" "$(lb_counter by_hash)"
expect_ge "datagrams routed by roved $HOME_ID's server ID" "$(lb_counter by_sid$HOME_ID)" 100
expect "datagrams routed by the other server ID" 0 "$(lb_counter by_sid$OTHER)"
expect "the other server's handshakes with the laptop" 0 "$(on $OTHER handshakes)"

# The health check finds the laptop's server dead: its server ID and every
# new flow go to the survivor, and old mappings are forgotten.
if [ "$HOME_ID" = 1 ]; then kill -KILL "$LB_PID1"; forget_pid "$LB_PID1"; lb_rules 2 2 2 nat
else kill -KILL "$LB_PID2"; forget_pid "$LB_PID2"; lb_rules 1 1 1 nat; fi
nsx "$LB_NS" conntrack -F >/dev/null 2>&1
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
	"$(sget "$(lb_ns $OTHER)" "$(lb_sock $OTHER)" tickets.group_resumed)"
wait "$PING2"
forget_pid "$PING2"
# 60 pings at 50 ms; the move costs the few sent before the reset came.
expect_ge "pings answered across the failover (of 60)" \
	"$(sed -n 's/.* \([0-9]*\) received.*/\1/p' "$WORK/ping2.log")" 50

printf '%d passed, %d failed\n' "$PASSED" "$E2E_FAILED"
e2e_finish
