#!/usr/bin/env bash
# Resets cross a forward (RST -> RESET_STREAM/STOP_SENDING -> RST): when one
# end of a forwarded connection aborts it, the other end's connection is
# reset too, within 5 s, the forward is gone from both sides' status, and it
# counts as "reset" (forward_counters: opened+1 reset+1) on both sides.
#  a. the client aborts while uploading through a LocalForward;
#  b. the target aborts while sending through a LocalForward;
#  c. the client aborts through a RemoteForward (LAN host -> laptop);
#  d. the client aborts while its forward is stalled: the target reads
#     1 KiB/s, so the stream is flow-blocked and rove has stopped reading;
#  e. the target aborts while the client reads 1 KiB/s (stalled the other
#     way).
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
topo_up

peer_set laptop AllowForward "$LAN_HOST/32:*"
peer_set laptop AllowRemoteForward "$SRV_LAN:2222"
client_add "$WORK/configs/rove.conf" \
	"LocalForward = 7001 = $LAN_HOST:7101" \
	"LocalForward = 7002 = $LAN_HOST:7102" \
	"LocalForward = 7004 = $LAN_HOST:7104" \
	"LocalForward = 7005 = $LAN_HOST:7105" \
	"RemoteForward = $SRV_LAN:2222 = 127.0.0.1:7103"
peer_bg t-a "$NS_LAN" serve "$LAN_HOST:7101" --results "$WORK/t-a.json"
peer_bg t-b "$NS_LAN" serve "$LAN_HOST:7102" --send 2000M --duration 1 --results "$WORK/t-b.json"
peer_bg t-c "$NS_LAP" serve "127.0.0.1:7103" --results "$WORK/t-c.json"
peer_bg t-d "$NS_LAN" serve "$LAN_HOST:7104" --rate 1K --results "$WORK/t-d.json"
peer_bg t-e "$NS_LAN" serve "$LAN_HOST:7105" --send 2000M --duration 4 --results "$WORK/t-e.json"
for p in 7101 7102 7104 7105; do wait_listen "$NS_LAN" $p "target"; done
wait_listen "$NS_LAP" 7103 "the -R target"
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
wait_listen "$NS_LAP" 7005 "rove's LocalForwards"
wait_listen "$NS_SRV" 2222 "roved's RemoteForward"

# case WHICH WHAT ABORTER NS ADDR SRV_TARGET LAP_TARGET CLIENT_ARGS...:
# ABORTER (client|target) resets the connection; the other end must see
# ECONNRESET. *_TARGET: the forward's "target" in roved's and rove's status.
case_() {
	local which=$1 what=$2 aborter=$3 ns=$4 addr=$5 st=$6 lt=$7 bl bs c s
	shift 7
	bl=$(lap_counters)
	bs=$(srv_counters)
	c=$(peer_run "$ns" 60 connect "$addr" --timeout 40 "$@")
	if ! wait_for 5 "$what: the target's connection ends" has_lines "$WORK/t-$which.json" 1; then
		fail "$what: the target's connection is still up 5 s after the client's end"
		return
	fi
	s=$(head -n1 "$WORK/t-$which.json")
	if [ "$aborter" = client ]; then
		expect_eq "$what: the client aborted" true "$(jfield "$c" aborted)"
		expect_eq "$what: the target's connection was reset" '["recv: ECONNRESET"]' \
			"$(jfield "$s" errors)"
	else
		expect_eq "$what: the target aborted" true "$(jfield "$s" aborted)"
		expect_eq "$what: the client's connection was reset" '["recv: ECONNRESET"]' \
			"$(jfield "$c" errors)"
	fi
	wait_for 5 "$what: roved's forward is gone" srv_forwards_are 0 "" "$st" ||
		fail "$what: roved still lists the forward: $(status "$NS_SRV" "$ROVED_SOCK" | jget 'peers[name=laptop].forwards')"
	wait_for 5 "$what: rove's forward is gone" lap_forwards_are 0 "" "$lt" ||
		fail "$what: rove still lists the forward: $(status "$NS_LAP" "$LAP_SOCK" | jget 'peers[0].forwards')"
	expect_eq "$what: rove's counters" "opened+1 reset+1" "$(counters_delta "$bl" "$(lap_counters)")"
	expect_eq "$what: roved's counters" "opened+1 reset+1" "$(counters_delta "$bs" "$(srv_counters)")"
}

L=$LAN_HOST
case_ a "client aborts an upload (-L)" client "$NS_LAP" 127.0.0.1:7001 \
	"$L:7101" "$L:7101" --send 2000M --duration 1
case_ b "target aborts a download (-L)" target "$NS_LAP" 127.0.0.1:7002 \
	"$L:7102" "$L:7102"
case_ c "client aborts an upload (-R)" client "$NS_LAN" "$SRV_LAN:2222" \
	"port 2222" 127.0.0.1:7103 --send 2000M --duration 1
# The target of e aborts 4 s after accepting; the client gives up 15 s
# after connecting.
case_ d "client aborts a stalled upload (-L)" client "$NS_LAP" 127.0.0.1:7004 \
	"$L:7104" "$L:7104" --send 2000M --duration 4
case_ e "target aborts a stalled download (-L)" target "$NS_LAP" 127.0.0.1:7005 \
	"$L:7105" "$L:7105" --rate 1K --timeout 15
alive "$ROVED_PID" roved
alive "$LAP_PID" rove
fwd_finish
