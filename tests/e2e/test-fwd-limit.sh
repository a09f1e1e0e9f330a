#!/usr/bin/env bash
# MaxForwards = 5 on roved: with 5 forwarded connections open, a 6th is
# refused cleanly (its client connection reset within 1 s, "limit" +1 on
# both sides, nothing else counted) while the 5 keep echoing; once they are
# closed, a new connection works again. Then the same limit on rove's side
# (MaxForwards = 5 in rove.conf, roved's default): the 6th is refused by
# rove itself ("limit" +1 on rove only).
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
topo_up

L_PORT=7001
T_PORT=7101

peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
client_add "$WORK/configs/rove.conf" "LocalForward = $L_PORT = $LAN_HOST:$T_PORT"
peer_bg echo "$NS_LAN" serve "$LAN_HOST:$T_PORT" --echo --results "$WORK/echo.json"
wait_listen "$NS_LAN" "$T_PORT" "the echo target"

# round SIDE: hold 5, check the 6th, check the 5 again; SIDE (server or
# client) is where the limit is configured.
round() {
	local side=$1 bl bs ready=$WORK/ready-$1 go=$WORK/go-$1 r out srv_delta
	bl=$(lap_counters)
	bs=$(srv_counters)
	bg "limit-$side" "$NS_LAP" "$PY" "$FWD_PEER" limit "127.0.0.1:$L_PORT" --open 5 \
		--ready-file "$ready" --go-file "$go" --timeout 60
	local pid=$BG_PID
	wait_for 30 "$side limit: 5 connections held and the 6th tried" test -s "$ready" ||
		die "$side limit: the driver did not get ready: $(cat "$WORK/limit-$side.log")"
	r=$(cat "$ready")
	expect_eq "$side limit: connections held" 5 "$(jfield "$r" held)"
	expect_eq "$side limit: held connections that echoed" 5 "$(jfield "$r" echo_before)"
	expect_eq "$side limit: the 6th connection is closed by" reset "$(jfield "$r" extra)"
	if awk -v m="$(jfield "$r" extra_ms)" 'BEGIN { exit !(m < 1000) }'; then
		ok "$side limit: the 6th was reset after $(jfield "$r" extra_ms) ms (< 1000)"
	else
		fail "$side limit: the 6th was reset after $(jfield "$r" extra_ms) ms"
	fi
	# While they are held: exactly 5 open forwards on each side.
	wait_for 5 "$side limit: roved lists 5 open forwards" srv_forwards_are 5 open ||
		fail "$side limit: roved lists $(forwards_count "$NS_SRV" "$ROVED_SOCK" laptop) forwards"
	wait_for 5 "$side limit: rove lists 5 open forwards" lap_forwards_are 5 open ||
		fail "$side limit: rove lists $(forwards_count "$NS_LAP" "$LAP_SOCK" first) forwards"
	touch "$go"
	wait_for 30 "$side limit: the driver finishes" eval "! kill -0 $pid 2>/dev/null"
	forget_pid "$pid"
	out=$(tail -n1 "$WORK/limit-$side.log")
	expect_eq "$side limit: held connections that echoed 64 KiB afterwards" 5 "$(jfield "$out" echo_after)"
	expect_eq "$side limit: driver errors" '[]' "$(jfield "$out" errors)"
	wait_for 10 "$side limit: roved's forwards list empties" srv_forwards_are 0 ||
		fail "$side limit: roved still lists forwards"
	wait_for 10 "$side limit: rove's forwards list empties" lap_forwards_are 0 ||
		fail "$side limit: rove still lists forwards"
	# The 6th never got to roved when rove refused it.
	if [ "$side" = server ]; then srv_delta="opened+5 completed+5 limit+1"; else srv_delta="opened+5 completed+5"; fi
	expect_eq "$side limit: rove's counters" "opened+5 completed+5 limit+1" \
		"$(counters_delta "$bl" "$(lap_counters)")"
	expect_eq "$side limit: roved's counters" "$srv_delta" \
		"$(counters_delta "$bs" "$(srv_counters)")"
	transfer_ok "$NS_LAP" "127.0.0.1:$L_PORT" 1048576 "$side limit: a new connection after the 5 closed"
}

server_set MaxForwards 5
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"
round server
stop_checked "$LAP_PID" laptop

# The same limit on rove's side.
server_set MaxForwards 256
stop_checked "$ROVED_PID" roved
client_add "$WORK/configs/rove.conf" "MaxForwards = 5"
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up (second round)"
wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"
round client
fwd_finish
