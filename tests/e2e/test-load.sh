#!/usr/bin/env bash
# Many peers at once, from tests/load/rove-load (one process, a session per
# key): roved configured with 550 peers, 500 of them connect; 20 pass ICMP
# echoes through the tunnel; roved restarts and all 500 come back at once
# (a restart storm) within LOAD_BACK_S seconds, each with 0-RTT on its
# first attempt; roved's status then lists exactly 500 peers established,
# each after one handshake with its 0-RTT accepted, and the other 50
# closed. Topology: tests/e2e/load-lib.sh.
. "$(dirname "$0")/load-lib.sh"
load_init "$@"
N=500
EXTRA=50
ACTIVE=20
# From the first lost session until all are back: under 1 s on two
# cores shared with rove-load (most of it roved's stop and start); the
# bound leaves room for a busy CI machine and a sanitizer build.
LOAD_BACK_S=${LOAD_BACK_S:-5}
load_topo_up
load_gen $((N + EXTRA))
load_start_roved

load_run load "$N" -C 64 -c 60 -i 1 -m "$ACTIVE" -t "$LOAD_TUN" -w 4 -T 2 \
	-r 60 -H 60
if load_wait_line load 90 "waiting for a server restart"; then
	ok "rove-load connected and passed traffic"
else
	fail "rove-load did not reach its restart phase"
fi
expect_eq "sessions connected" "$N" "$(load_result load connected)"
expect_eq "sessions refused" 0 "$(load_result load refused)"
expect_eq "active sessions answered through the tunnel" "$ACTIVE" \
	"$(load_result load echo_sessions)"
expect_eq "roved's peer states before the restart" \
	"closed $EXTRA,established $N" "$(peer_states | paste -sd,)"

# The restart: roved closes every connection, comes back with the same
# StateDir (ticket keys, register, tokens), and the sessions resume.
load_stop_roved
mv "$WORK/roved.log" "$WORK/roved-1.log"
load_start_roved
load_wait_line load 60 "holding the sessions" ||
	fail "rove-load did not finish its restart phase"
expect_eq "sessions that lost their connection" "$N" "$(load_result load lost)"
expect_eq "sessions back after the restart" "$N" "$(load_result load back)"
expect_eq "handshakes after the restart" "$N" "$(load_result load handshakes)"
expect_eq "0-RTT attempted after the restart" "$N" \
	"$(load_result load zero_rtt_attempted)"
# Each session came back on its first attempt: none waited out a
# back-off, none lost its ticket to an attempt the server never saw. One
# exception is allowed, a known gap: about one handshake in a few
# thousand of a restart storm fails in roved's TLS (ngtcp2 ERR_CRYPTO, no
# alert; rove-load's "slowest" line names it). Its session comes back on
# the next attempt, at once, and may find its ticket spent (single use),
# so its 0-RTT is the one that may be rejected.
attempts=$(load_result load attempts)
extra=$((${attempts:-0} - N))
if [ "$extra" -ge 0 ] && [ "$extra" -le 1 ]; then
	ok "connection attempts after the restart = $attempts (of $N sessions)"
else
	fail "connection attempts after the restart: $attempts, expected $N or $((N + 1))"
fi
accepted=$(load_result load zero_rtt_accepted)
rejected=$(load_result load zero_rtt_rejected)
expect_eq "0-RTT accepted + rejected after the restart" "$N" \
	"$((${accepted:-0} + ${rejected:-0}))"
if [ "${rejected:-1}" -le "$extra" ]; then
	ok "0-RTT rejected after the restart = $rejected (retried sessions: $extra)"
else
	fail "0-RTT rejected after the restart: $rejected, more than the $extra retried"
fi
back_s=$(load_result load back_s)
if awk -v t="$back_s" -v b="$LOAD_BACK_S" 'BEGIN { exit !(t != "" && t < b) }'; then
	ok "all $N back ${back_s} s after the first loss (< $LOAD_BACK_S s)"
else
	fail "all $N back ${back_s:-never} s after the first loss (bound $LOAD_BACK_S s)"
fi

# The restarted roved agrees, peer by peer: exactly the N established,
# each on one handshake whose 0-RTT it accepted; the others closed.
doc=$WORK/status.json
status "$NS_SRV" "$ROVED_SOCK" >"$doc" || fail "roved status failed"
counts=$("$PY" - "$doc" "$N" <<-'EOF'
	import json, sys
	d = json.load(open(sys.argv[1]))
	n = int(sys.argv[2])
	peers = d["peers"]
	ours = [p for p in peers if int(p["name"].split("-")[1]) < n]
	print("configured=%d established=%d ours_established=%d "
	      "ours_one_handshake=%d ours_zero_rtt_accepted=%d" % (
	          len(peers), sum(p["state"] == "established" for p in peers),
	          sum(p["state"] == "established" for p in ours),
	          sum(p["handshakes"] == 1 for p in ours),
	          sum(p["zero_rtt"]["accepted"] == 1 for p in ours)))
	EOF
)
expect_eq "roved's status after the restart" \
	"configured=$((N + EXTRA)) established=$N ours_established=$N ours_one_handshake=$N ours_zero_rtt_accepted=$((N - ${rejected:-0}))" \
	"$counts"
# The short forms a server with thousands of peers needs: counts alone,
# and one peer.
srv_status() { nsx "$NS_SRV" "$BUILD/rove" status -s "$ROVED_SOCK" --json "$@"; }
expect_eq "status --summary: peer states" \
	"{\"configured\":$((N + EXTRA)),\"established\":$N,\"handshaking\":0,\"closed\":$EXTRA}" \
	"$(srv_status --summary | jget peer_states)"
expect_eq "status --summary: a server's document without the list" "server False" \
	"$(srv_status --summary | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
print(d["role"], "peers" in d)')"
expect_eq "status --peer load-00007" "1 load-00007 established" \
	"$(srv_status --peer load-00007 | "$PY" -c '
import json, sys
p = json.load(sys.stdin)["peers"]
print(len(p), p[0]["name"], p[0]["state"])')"
expect_eq "status --peer of a peer not connected" "closed" \
	"$(srv_status --peer "load-00$((N + EXTRA - 1))" | jget 'peers[0].state')"
expect_eq "status --peer of no such peer" "[]" \
	"$(srv_status --peer nobody | jget peers)"
stop_pid "$LOAD_PID"
forget_pid "$LOAD_PID"
e2e_finish
