#!/usr/bin/env bash
# Descriptor exhaustion through the metrics port, which any local user can
# reach. 1. roved starts with the soft descriptor limit of a default
# install (1024) under a higher hard limit: it takes the hard limit, so
# 1,100 idle connections to MetricsListen leave it room, and a forward
# opened meanwhile reaches its target. 2. roved with a hard limit of 256
# it cannot raise: 300 idle connections run it out of descriptors, and
# its listeners (metrics, ListenTCP) pause instead of spinning on a
# readable socket: roved uses little CPU meanwhile and logs a few lines,
# not one per try; a TLS-over-TCP client gets a close, not a hang.
# e2e: light
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
e2e_transport quic
topo_up

L_PORT=7001
T_PORT=7101
M_PORT=9101
peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
client_add "$WORK/configs/rove.conf" "LocalForward = $L_PORT = $LAN_HOST:$T_PORT"
echo "MetricsListen = 127.0.0.1:$M_PORT" >"$WORK/m.line"
sed -i '/^\[Server\]/r '"$WORK/m.line" "$WORK/configs/roved.conf"

# start_roved_limited SOFT:HARD: roved under that descriptor limit.
start_roved_limited() {
	bg roved "$NS_SRV" prlimit --nofile="$1" "$BUILD/roved" -f -c \
		"$WORK/configs/roved.conf" ${ROVE_VERBOSE:+-v}
	ROVED_PID=$BG_PID
	ROVED_SOCK=$(conf_path "$WORK/configs/roved.conf" ControlSocket)
	wait_for 10 "roved's control socket" status_ok "$NS_SRV" "$ROVED_SOCK" ||
		die "roved did not come up"
}

# hold NAME N: N idle connections to the metrics port from the server's
# own namespace, held until $WORK/NAME.stop exists (at most 60 s); the
# number made goes to $WORK/NAME.n.
hold() {
	bg "$1" "$NS_SRV" "$PY" "$E2E_DIR/hold-conns.py" "$M_PORT" "$2" "$WORK/$1"
	wait_for 20 "$1's connections" test -s "$WORK/$1.n" ||
		fail "$1: no count of the connections made"
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
nofile_soft() { awk '/^Max open files/ { print $4 }' "/proc/$1/limits"; }
nfds() { ls "/proc/$1/fd" | wc -l; }

# 1. A default install's soft limit: raised at start (and MetricsListen
# holds 32 of the 1,100, closing the others as they come).
start_roved_limited 1024:
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
hard=$(awk '/^Max open files/ { print $5 }' "/proc/$ROVED_PID/limits")
expect_eq "roved's soft descriptor limit: its hard limit" "$hard" \
	"$(nofile_soft "$ROVED_PID")"
peer_bg target "$NS_LAN" serve "$LAN_HOST:$T_PORT" --echo
wait_listen "$NS_LAN" "$T_PORT" "the -L target"
wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"
hold idle1 1100
log "idle connections to the metrics port: $(cat "$WORK/idle1.n"), roved holds $(nfds "$ROVED_PID") descriptors"
expect_eq "idle connections made to the metrics port" 1100 "$(cat "$WORK/idle1.n")"
transfer_ok "$NS_LAP" "127.0.0.1:$L_PORT" 65536 "a forward opened during 1,100 idle metrics connections"
check "laptop -> server $SRV_TUN4 during them" ping_ok "$NS_LAP" -c 5 -i 0.05 "$SRV_TUN4"
touch "$WORK/idle1.stop"
stop_checked "$LAP_PID" laptop
stop_checked "$ROVED_PID" roved
mv "$WORK/roved.log" "$WORK/roved-1.log"

# 2. A hard limit of 256: out of descriptors for real, through a metrics
# port let hold more connections than that. The listeners must pause, not
# spin.
e2e_transport tcp
echo "MetricsConnections = 1024" >"$WORK/m.line"
sed -i '/^\[Server\]/r '"$WORK/m.line" "$WORK/configs/roved.conf"
start_roved_limited 256:256
hold idle2 300
made=$(cat "$WORK/idle2.n")
log "idle connections made: $made, roved holds $(nfds "$ROVED_PID") of 256"
t0=$(cpu_ticks "$ROVED_PID")
sleep 3
t1=$(cpu_ticks "$ROVED_PID")
hz=$(getconf CLK_TCK)
# A spinning loop takes a whole core: 3 s. Allow a tenth of that.
if [ $(((t1 - t0) * 1000 / hz)) -le 300 ]; then
	ok "roved's CPU over 3 s out of descriptors: $(((t1 - t0) * 1000 / hz)) ms"
else
	fail "roved's CPU over 3 s out of descriptors: $(((t1 - t0) * 1000 / hz)) ms (spinning)"
fi
# A TLS/TCP client now: refused with a close by the ListenTCP guard.
RC=0
nsx "$NS_LAP" timeout 5 "$BUILD/rove" up -f -c "$WORK/configs/rove.conf" \
	>"$WORK/tcp-client.log" 2>&1 || RC=$?
n=$(grep -c "accept: Too many open files" "$WORK/roved.log")
if [ "$n" -ge 1 ] && [ "$n" -le 4 ]; then
	ok "roved's log: $n line(s) about running out of descriptors"
else
	fail "roved's log: $n lines about running out of descriptors (expected 1-4)"
fi
touch "$WORK/idle2.stop"
sleep 1.5
alive "$ROVED_PID" roved
check "roved answers its status socket after it" status_ok "$NS_SRV" "$ROVED_SOCK"
stop_checked "$ROVED_PID" roved
e2e_finish
