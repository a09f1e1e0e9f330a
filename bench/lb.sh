#!/usr/bin/env bash
# Resumption across servers: two roved members of a group (one KeyDir,
# ServerID 01 and 02) behind the nftables balancer of tests/e2e/lb-lib.sh,
# and tests/load/rove-load with LB_N sessions (default 1,000) spread over
# both by the balancer's hash. Member 1 is then stopped (SIGTERM: it closes
# its connections) while the balancer's health check hands its server ID
# and its share of new flows to member 2. Prints:
#   connect     LB_N sessions: time until all are up, how the balancer
#               spread them (each member's established peers)
#   failover    the sessions member 1 held: time from the first loss until
#               all are back on member 2, the distribution of each one's
#               time without a session, 0-RTT accepted of attempted, and
#               member 2's resumptions of member 1's tickets
#   survivors   member 2's own sessions: handshakes during the failover
#               (0: untouched)
#
# usage: bench/lb.sh BUILD_DIR
# Every phase is bounded (rove-load -c/-r/-H, wait_for); about 30 s.
. "$(dirname "$0")/../tests/e2e/load-lib.sh"
. "$(dirname "$0")/../tests/e2e/lb-lib.sh"
TEST_NAME=bench-lb
N=${LB_N:-1000}
load_init "$1"
ns_add "$NS_LOAD"
lb_topo_up "$NS_LOAD" "$LOAD_SRC_NET"
nsx "$NS_LOAD" ip addr add "$LOAD_SRC_NET" dev lo
lb_rules 1 2 0
log "generating $N keys and peers"
load_gen "$N"
sed -i 's/^Tun = .*/Tun = none/; /^Address = /d' "$LOAD_CONF"
lb_member_confs "$LOAD_CONF"
lb_start_members

# established N: member N's established peers.
established() {
	nsx "$(lb_ns "$1")" "$BUILD/rove" status -s "$(lb_sock "$1")" --json --summary |
		"$PY" -c 'import json, sys; print(json.load(sys.stdin)["peer_states"].get("established", 0))'
}
# member_stat N PATH: PATH in member N's status.
member_stat() { sget "$(lb_ns "$1")" "$(lb_sock "$1")" "$2"; }

log "connecting $N sessions through the balancer"
bg load "$NS_LOAD" "$BUILD/tests/rove-load" run -s "$LB_VIP:$LB_PORT" -P "$SRV_PUB" \
	-k "$LOAD_KEYS" -n "$N" -b "$LOAD_SRC_FIRST" -B "$LOAD_PER_SRC" -c 60 -i 1 \
	-r 60 -H 5
LOAD_PID=$BG_PID
load_wait_line load 90 "waiting for a server restart" ||
	die "rove-load did not connect its sessions"
on1=$(established 1)
on2=$(established 2)
# handshakes_of N: "name handshakes" of member N's established peers.
handshakes_of() {
	nsx "$(lb_ns "$1")" "$BUILD/rove" status -s "$(lb_sock "$1")" --json | "$PY" -c '
import json, sys
for p in json.load(sys.stdin)["peers"]:
    if p["state"] == "established":
        print(p["name"], p["handshakes"])'
}
handshakes_of 2 | sort >"$WORK/member2-before"

log "stopping member 1; the balancer sends its server ID and new flows to member 2"
lb_rules 2 2 2
stop_pid "$LB_PID1"
forget_pid "$LB_PID1"
load_wait_line load 70 "holding the sessions" ||
	fail "rove-load did not see every session back"
on2_after=$(established 2)
group_resumed=$(member_stat 2 tickets.group_resumed)
handshakes_of 2 | sort >"$WORK/member2-after"
# Member 2's own sessions with the same handshake count after as before.
untouched=$(join "$WORK/member2-before" "$WORK/member2-after" | awk '$2 == $3' | wc -l)
stop_pid "$LOAD_PID"
forget_pid "$LOAD_PID"

r() { load_result load "$1"; }
echo
echo "Group of two behind an nftables CID balancer: $N sessions from rove-load" \
	"($(basename "$BUILD"); $(nproc) CPUs shared by all)"
printf '  %-34s %s\n' \
	"connect $N" "$(r connect_s) s, $(r handshakes_per_s) handshakes/s" \
	"spread by the balancer" "member 1: $on1, member 2: $on2" \
	"failover: back on member 2" "$(r back) of $(r lost) in $(r back_s) s after the first loss" \
	"failover: 0-RTT" "$(r zero_rtt_accepted) accepted of $(r zero_rtt_attempted) attempted, $(r zero_rtt_rejected) rejected" \
	"member 2: other member's tickets" "$group_resumed resumed" \
	"member 2 after" "$on2_after established" \
	"member 2's own sessions" "$untouched of $on2 untouched (no new handshake)"
echo "  rove-load:"
grep -v '^RESULT\|^waiting\|^holding' "$WORK/load.log" | sed 's/^/    /'
e2e_finish
