#!/usr/bin/env bash
# Half-close through forwards: each direction of a forwarded connection
# closes on its own. (a) The client sends 1 MiB and shuts down its write
# side; the target answers 1 MiB only after that EOF (1.5 s later): the
# whole answer arrives. (b) The reverse: the target sends 1 MiB and shuts
# down; the client answers after the EOF: the whole answer arrives at the
# target. Both through a LocalForward and a RemoteForward.
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
topo_up

BYTES=1048576
LA_PORT=7001; TA_PORT=7101   # -L, target answers after EOF
LB_PORT=7002; TB_PORT=7102   # -L, target speaks first
RA_PORT=2222; RTA_PORT=7201  # -R, target answers after EOF
RB_PORT=2223; RTB_PORT=7202  # -R, target speaks first

peer_set laptop AllowForward "$LAN_HOST/32:$TA_PORT, $LAN_HOST/32:$TB_PORT"
peer_set laptop AllowRemoteForward "$SRV_LAN:$RA_PORT, *:$RB_PORT"
client_add "$WORK/configs/rove.conf" \
	"LocalForward = $LA_PORT = $LAN_HOST:$TA_PORT" \
	"LocalForward = $LB_PORT = $LAN_HOST:$TB_PORT" \
	"RemoteForward = $SRV_LAN:$RA_PORT = 127.0.0.1:$RTA_PORT" \
	"RemoteForward = *:$RB_PORT = 127.0.0.1:$RTB_PORT"
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"

peer_bg ta "$NS_LAN" serve "$LAN_HOST:$TA_PORT" --send 1M --after-eof \
	--answer-delay 1.5 --results "$WORK/ta.json"
peer_bg tb "$NS_LAN" serve "$LAN_HOST:$TB_PORT" --send 1M --results "$WORK/tb.json"
peer_bg rta "$NS_LAP" serve "127.0.0.1:$RTA_PORT" --send 1M --after-eof \
	--answer-delay 1.5 --results "$WORK/rta.json"
peer_bg rtb "$NS_LAP" serve "127.0.0.1:$RTB_PORT" --send 1M --results "$WORK/rtb.json"
wait_listen "$NS_LAN" "$TA_PORT" "target a"
wait_listen "$NS_LAN" "$TB_PORT" "target b"
wait_listen "$NS_LAP" "$RTA_PORT" "-R target a"
wait_listen "$NS_LAP" "$RTB_PORT" "-R target b"
wait_listen "$NS_LAP" "$LA_PORT" "rove's LocalForward a"
wait_listen "$NS_LAP" "$LB_PORT" "rove's LocalForward b"
wait_listen "$NS_SRV" "$RA_PORT" "roved's RemoteForward a"
wait_listen "$NS_SRV" "$RB_PORT" "roved's RemoteForward b"

# half_closed_open NS SOCK PEER: the side that connects to the target
# (roved for -L, rove for -R; PEER is its peer's name, or "first") lists
# exactly one forward, open, with the whole request written to the target
# and no answer yet: the target has the client's EOF and is still to
# answer.
half_closed_open() {
	status "$1" "$2" | "$PY" -c '
import json, sys
peers = json.load(sys.stdin)["peers"]
p = peers[0] if sys.argv[1] == "first" else \
    [x for x in peers if x["name"] == sys.argv[1]][0]
f = p["forwards"]
sys.exit(0 if len(f) == 1 and f[0]["state"] == "open" and
         f[0]["rx_bytes"] == int(sys.argv[2]) and f[0]["tx_bytes"] == 0 else 1)' "$3" "$BYTES"
}

# exchange WHAT NS ADDR TARGET_RESULTS FIRST: run one exchange; FIRST is
# "client" (client sends, target answers after EOF) or "target".
exchange() {
	local what=$1 ns=$2 addr=$3 res=$4 first=$5 c s args=(--send 1M)
	[ "$first" = target ] && args+=(--after-eof)
	bg "client-$what" "$ns" "$PY" "$FWD_PEER" connect "$addr" "${args[@]}" --timeout 60
	local pid=$BG_PID
	if [ "$first" = client ]; then
		# While the target waits, the request direction is closed and
		# the forward must still be up.
		local side=("$NS_SRV" "$ROVED_SOCK" laptop)
		[ "$ns" = "$NS_LAN" ] && side=("$NS_LAP" "$LAP_SOCK" first)
		if wait_for 5 "$what: one open forward while half-closed" half_closed_open "${side[@]}"; then
			ok "$what: the forward stays open while half-closed"
		else
			fail "$what: no open, half-closed forward"
		fi
	fi
	wait_for 60 "$what: the client finishes" eval "! kill -0 $pid 2>/dev/null"
	wait "$pid"; expect_eq "$what: client exit status" 0 "$?"
	forget_pid "$pid"
	c=$(head -n1 "$WORK/client-$what.log")
	wait_for 10 "$what: the target's result" has_lines "$res" 1 ||
		{ fail "$what: the target reported nothing"; return; }
	s=$(head -n1 "$res")
	expect_eq "$what: target received" "$BYTES" "$(jfield "$s" rx)"
	expect_eq "$what: client received" "$BYTES" "$(jfield "$c" rx)"
	expect_eq "$what: sha256 client -> target" "$(jfield "$c" tx_sha)" "$(jfield "$s" rx_sha)"
	expect_eq "$what: sha256 target -> client" "$(jfield "$s" tx_sha)" "$(jfield "$c" rx_sha)"
	expect_eq "$what: client saw EOF, shut down its side, no errors" "true true []" \
		"$(jfield "$c" rx_eof) $(jfield "$c" tx_shut) $(jfield "$c" errors)"
	expect_eq "$what: target saw EOF, shut down its side, no errors" "true true []" \
		"$(jfield "$s" rx_eof) $(jfield "$s" tx_shut) $(jfield "$s" errors)"
}

before_lap=$(lap_counters)
before_srv=$(srv_counters)
exchange L-client-first "$NS_LAP" "127.0.0.1:$LA_PORT" "$WORK/ta.json" client
exchange L-target-first "$NS_LAP" "127.0.0.1:$LB_PORT" "$WORK/tb.json" target
exchange R-client-first "$NS_LAN" "$SRV_LAN:$RA_PORT" "$WORK/rta.json" client
exchange R-target-first "$NS_LAN" "$SRV_LAN:$RB_PORT" "$WORK/rtb.json" target

wait_for 10 "roved's forwards list empties" srv_forwards_are 0 ||
	fail "roved still lists forwards"
wait_for 10 "rove's forwards list empties" lap_forwards_are 0 ||
	fail "rove still lists forwards"
expect_eq "rove's counters" "opened+4 completed+4" \
	"$(counters_delta "$before_lap" "$(lap_counters)")"
expect_eq "roved's counters" "opened+4 completed+4" \
	"$(counters_delta "$before_srv" "$(srv_counters)")"
fwd_finish
