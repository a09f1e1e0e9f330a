#!/usr/bin/env bash
# 100 MB each way through one forwarded connection, with sha256 compared at
# both ends: through a LocalForward (laptop -> LAN host) and through a
# RemoteForward (LAN host -> roved's port -> laptop).
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
topo_up

SIZE=100M
BYTES=$((100 * 1024 * 1024))
L_PORT=7001          # rove's -L listener (laptop, 127.0.0.1)
T_PORT=7101          # target on the LAN host
R_PORT=2222          # roved's -R listener (on its LAN address)
RT_PORT=7201         # -R target in the laptop namespace

peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
peer_set laptop AllowRemoteForward "$SRV_LAN:$R_PORT"
client_add "$WORK/configs/rove.conf" \
	"LocalForward = $L_PORT = $LAN_HOST:$T_PORT" \
	"RemoteForward = $SRV_LAN:$R_PORT = 127.0.0.1:$RT_PORT"
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"

peer_bg target-l "$NS_LAN" serve "$LAN_HOST:$T_PORT" --send "$SIZE" \
	--results "$WORK/target-l.json"
peer_bg target-r "$NS_LAP" serve "127.0.0.1:$RT_PORT" --send "$SIZE" \
	--results "$WORK/target-r.json"
wait_listen "$NS_LAN" "$T_PORT" "the -L target"
wait_listen "$NS_LAP" "$RT_PORT" "the -R target"
wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"
wait_listen "$NS_SRV" "$R_PORT" "roved's RemoteForward"

# check_bulk WHAT CLIENT_JSON SERVER_RESULTS: each side received exactly
# what the other sent, both FINs arrived, nothing failed.
check_bulk() {
	local what=$1 c=$2 s
	wait_for 30 "$what: the target's result" has_lines "$3" 1 ||
		{ fail "$what: the target reported nothing"; return; }
	s=$(head -n1 "$3")
	expect_eq "$what: client sent" "$BYTES" "$(jfield "$c" tx)"
	expect_eq "$what: target received" "$BYTES" "$(jfield "$s" rx)"
	expect_eq "$what: target sent" "$BYTES" "$(jfield "$s" tx)"
	expect_eq "$what: client received" "$BYTES" "$(jfield "$c" rx)"
	expect_eq "$what: sha256 client -> target" "$(jfield "$c" tx_sha)" "$(jfield "$s" rx_sha)"
	expect_eq "$what: sha256 target -> client" "$(jfield "$s" tx_sha)" "$(jfield "$c" rx_sha)"
	expect_eq "$what: client saw EOF" true "$(jfield "$c" rx_eof)"
	expect_eq "$what: target saw EOF" true "$(jfield "$s" rx_eof)"
	expect_eq "$what: client errors" '[]' "$(jfield "$c" errors)"
	expect_eq "$what: target errors" '[]' "$(jfield "$s" errors)"
	log "$what: 2 x 100 MiB in $(jfield "$c" secs) s"
}

before_lap=$(lap_counters)
before_srv=$(srv_counters)
out=$(peer_run "$NS_LAP" 200 connect "127.0.0.1:$L_PORT" --send "$SIZE" --timeout 180)
check_bulk "LocalForward" "$out" "$WORK/target-l.json"

out=$(peer_run "$NS_LAN" 200 connect "$SRV_LAN:$R_PORT" --send "$SIZE" --timeout 180)
check_bulk "RemoteForward" "$out" "$WORK/target-r.json"

# Both forwards completed cleanly on both sides and are gone from status.
wait_for 10 "roved's forwards list empties" srv_forwards_are 0 ||
	fail "roved still lists forwards: $(status "$NS_SRV" "$ROVED_SOCK" | jget 'peers[name=laptop].forwards')"
wait_for 10 "rove's forwards list empties" lap_forwards_are 0 ||
	fail "rove still lists forwards: $(status "$NS_LAP" "$LAP_SOCK" | jget 'peers[0].forwards')"
expect_eq "rove's counters" "opened+2 completed+2" \
	"$(counters_delta "$before_lap" "$(lap_counters)")"
expect_eq "roved's counters" "opened+2 completed+2" \
	"$(counters_delta "$before_srv" "$(srv_counters)")"
fwd_finish
