#!/usr/bin/env bash
# 200 concurrent connections through one LocalForward, 1 MiB each way per
# connection (an echo target on the LAN host): every echo's sha256 equals
# what that connection sent, within a bounded time.
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
topo_up

L_PORT=7001
T_PORT=7101
CONNS=200

peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
client_add "$WORK/configs/rove.conf" "LocalForward = $L_PORT = $LAN_HOST:$T_PORT"
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
peer_bg echo "$NS_LAN" serve "$LAN_HOST:$T_PORT" --echo --results "$WORK/echo.json"
wait_listen "$NS_LAN" "$T_PORT" "the echo target"
wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"

before_lap=$(lap_counters)
before_srv=$(srv_counters)
out=$(peer_run "$NS_LAP" 150 many "127.0.0.1:$L_PORT" --conns "$CONNS" --size 1M --timeout 120)
log "result: $out"
expect_eq "connections whose echo matched (sha256, length)" "$CONNS" "$(jfield "$out" ok)"
expect_eq "failed connections" '[]' "$(jfield "$out" bad)"
wait_for 20 "the echo target reports $CONNS connections" has_lines "$WORK/echo.json" "$CONNS" ||
	fail "the echo target saw $(lines "$WORK/echo.json") connections"
expect_eq "connections the target echoed 1 MiB on" "$CONNS" \
	"$(grep -c '"echoed": 1048576, "errors": \[\]' "$WORK/echo.json")"

wait_for 20 "roved's forwards list empties" srv_forwards_are 0 ||
	fail "roved still lists $(forwards_count "$NS_SRV" "$ROVED_SOCK" laptop) forwards"
wait_for 20 "rove's forwards list empties" lap_forwards_are 0 ||
	fail "rove still lists $(forwards_count "$NS_LAP" "$LAP_SOCK" first) forwards"
expect_eq "rove's counters" "opened+$CONNS completed+$CONNS" \
	"$(counters_delta "$before_lap" "$(lap_counters)")"
expect_eq "roved's counters" "opened+$CONNS completed+$CONNS" \
	"$(counters_delta "$before_srv" "$(srv_counters)")"
fwd_finish
