#!/usr/bin/env bash
# Workers = 2 and SIGHUP: every worker applies the configuration worker 0
# read and applied, never a file read again on its own. Worker 1 is held
# (SIGSTOP) while worker 0 reloads a file without peer branch, and the
# file is then broken (an edit under way) before worker 1 runs again:
# worker 1 still drops branch, as worker 0 did, so a removed peer cannot
# steer its handshake (the connection ID's worker octet) to a worker that
# still has it. Worker 0's status shows every worker's reload generation.
# A SIGHUP to worker 1 alone reads nothing: the peers stay worker 0's.
# Then a good file brings branch back in both.
# e2e: light
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
topo_up
C=$WORK/configs/roved.conf
sed -i 's/^\[Server\]$/[Server]\nWorkers = 2/' "$C"
cp "$C" "$WORK/roved-both.conf"
# The same without its second [Peer] (branch).
awk '/^\[Peer\]/ { n++ } n < 2' "$C" >"$WORK/roved-laptop.conf"
start_roved
SOCK1=$ROVED_SOCK.1
wait_for 10 "worker 1's control socket" status_ok "$NS_SRV" "$SOCK1" ||
	die "worker 1 did not come up"
W1=$(ps -o pid= --ppid "$ROVED_PID" | tr -d ' ')
[ -n "$W1" ] || die "no worker 1 under roved ($ROVED_PID)"

# peers SOCKET: the names of the peers that process has configured.
peers() {
	status "$NS_SRV" "$1" | "$PY" -c '
import json, sys
print(" ".join(sorted(p["name"] for p in json.load(sys.stdin)["peers"])))'
}
# put FILE: the configuration becomes FILE (replaced at once, as editors
# and config managers do).
put() { cp "$1" "$C.new" && mv "$C.new" "$C"; }
applied() { [ "$(srv_get reloads.applied)" = "$1" ]; }

expect_eq "worker 1's peers at start" "branch laptop" "$(peers "$SOCK1")"
kill -STOP "$W1"
put "$WORK/roved-laptop.conf"
kill -HUP "$ROVED_PID"
wait_for 10 "worker 0's reload" applied 1 || fail "worker 0 did not apply the reload"
# The next edit, half written, when worker 1 gets to its SIGHUP.
printf '[Server]\nListen = \n' >"$C"
kill -CONT "$W1"
sleep 1.5
expect_eq "worker 0's peers after the reload" "laptop" "$(peers "$ROVED_SOCK")"
expect_eq "worker 1's peers after the reload" "laptop" "$(peers "$SOCK1")"
expect_eq "worker 0's reload generation" 1 "$(srv_get reloads.generation)"
expect_eq "worker 1's reload generation, as worker 0 shows it" 1 \
	"$(srv_get reloads.workers[worker=1].generation)"
expect_eq "worker 1's reloads refused, as worker 0 shows it" 0 \
	"$(srv_get reloads.workers[worker=1].refused)"

# A SIGHUP to worker 1 alone, with branch back in the file.
put "$WORK/roved-both.conf"
kill -HUP "$W1"
sleep 1.5
expect_eq "worker 1's peers after a SIGHUP of its own" "laptop" "$(peers "$SOCK1")"

kill -HUP "$ROVED_PID"
wait_for 10 "worker 0's second reload" applied 2 || fail "worker 0 did not apply the second reload"
sleep 1.5
expect_eq "worker 0's peers after the second reload" "branch laptop" "$(peers "$ROVED_SOCK")"
expect_eq "worker 1's peers after the second reload" "branch laptop" "$(peers "$SOCK1")"
expect_eq "worker 1's reload generation, as worker 0 shows it" 2 \
	"$(srv_get reloads.workers[worker=1].generation)"
check "roved still runs" kill -0 "$ROVED_PID"
check "worker 1 still runs" kill -0 "$W1"
e2e_finish
