# Shared by tests/e2e/test-load.sh and bench/scale.sh: one roved with many
# configured peers, and tests/load/rove-load playing thousands of them from
# a second namespace.
#
#   +-- $NS_SRV ------------+          +-- $NS_LOAD -------------------+
#   | roved                 |   veth   | rove-load                     |
#   | eth0 198.18.0.1/24    +----------+ eth0 198.18.0.2/24            |
#   | rove0 198.19.0.1/16   |          | lo 198.18.16.0/20: the source |
#   | 198.18.16.0/20 via    |          |   addresses, LOAD_PER_SRC     |
#   |   198.18.0.2          |          |   sessions each               |
#   +-----------------------+          +-------------------------------+
#
# Sources are spread over addresses because roved admits 20 handshakes at
# once from one address (admit.h), as it would from one subscriber; the
# whole /20 is local to lo, so each session binds its own address without
# an address per session, and roved's namespace routes it (one neighbour).
#
# Usage:
#	. "$(dirname "$0")/load-lib.sh"
#	load_init BUILD_DIR
#	load_topo_up
#	load_gen CONFIGURED          # keys and roved.conf with that many peers
#	load_start_roved             # $ROVED_PID, $ROVED_SOCK
#	load_run OUT N [rove-load options]   # in the background: $LOAD_PID
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NS_LOAD=rove-$$-load
LOAD_SRV=198.18.0.1
LOAD_CLI=198.18.0.2
LOAD_SRC_NET=198.18.16.0/20
LOAD_SRC_FIRST=198.18.16.1
LOAD_PER_SRC=${LOAD_PER_SRC:-8}
# rove-load -j: its processes (the clients' side of every handshake).
LOAD_PROCS=${LOAD_PROCS:-$(nproc)}
LOAD_TUN=198.19.0.1
LOAD_PORT=4433
# roved's environment as its systemd unit sets it (the heap in huge
# pages), so that what is measured is what is shipped.
ROVED_TUNABLES=$(sed -n 's/^Environment=GLIBC_TUNABLES=//p' \
	"$TOP/configs/systemd/roved.service.in")
# Every peer may forward to a TCP sink on roved's side (load_sink_start).
LOAD_SINK=$LOAD_SRV
LOAD_SINK_PORT=7001

load_init() {
	e2e_init "$@"
	[ -x "$BUILD/tests/rove-load" ] ||
		{ echo "$0: $BUILD/tests/rove-load is missing; run make first" >&2; exit 2; }
	LOAD_CONF=$WORK/configs/load-roved.conf
	LOAD_KEYS=$WORK/load.keys
	SRV_PUB=$("$BUILD/rove" pubkey <"$WORK/configs/keys/server.key") ||
		die "rove pubkey failed"
}

load_topo_up() {
	ns_add "$NS_SRV"
	ns_add "$NS_LOAD"
	veth "$NS_SRV" eth0 "$NS_LOAD" eth0
	ip -n "$NS_SRV" addr add "$LOAD_SRV/24" dev eth0
	ip -n "$NS_LOAD" addr add "$LOAD_CLI/24" dev eth0
	ip -n "$NS_LOAD" addr add "$LOAD_SRC_NET" dev lo
	ip -n "$NS_SRV" route add "$LOAD_SRC_NET" via "$LOAD_CLI"
	wait_for 10 "the load namespace reaches roved's" \
		nsx "$NS_LOAD" ping -c 1 -W 1 -I "$LOAD_SRC_FIRST" "$LOAD_SRV" \
		>/dev/null 2>&1 || die "the link between the namespaces does not come up"
}

# load_gen COUNT: COUNT keys in $LOAD_KEYS and a roved.conf with their
# peers in $LOAD_CONF; the seconds generating took in $LOAD_GEN_S.
load_gen() {
	local t0 t1
	t0=$(date +%s%N)
	"$BUILD/tests/rove-load" gen -n "$1" -k "$LOAD_KEYS" -p "$WORK/load-peers.conf" \
		-a "$LOAD_SINK/32:$LOAD_SINK_PORT" ||
		die "rove-load gen failed"
	t1=$(date +%s%N)
	LOAD_GEN_S=$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.2f", ns / 1e9 }')
	cat >"$LOAD_CONF" <<-EOF
	# Written by tests/e2e/load-lib.sh: roved with $1 peers.
	[Server]
	Listen = $LOAD_SRV:$LOAD_PORT
	PrivateKeyFile = keys/server.key
	Tun = rove0
	Address = $LOAD_TUN/16
	StateDir = state/roved-load
	ControlSocket = run/roved-load.sock
	KeepAlive = 15
	IdleTimeout = 120
	EOF
	cat "$WORK/load-peers.conf" >>"$LOAD_CONF"
}

# load_sink_start: a TCP sink on $LOAD_SINK:$LOAD_SINK_PORT in roved's
# namespace (tests/e2e/fwd-peer.py), one JSON line per connection in
# $WORK/sink.json.
load_sink_start() {
	bg sink "$NS_SRV" "$PY" "$E2E_DIR/fwd-peer.py" serve \
		"$LOAD_SINK:$LOAD_SINK_PORT" --results "$WORK/sink.json"
	wait_for 10 "the sink" load_sink_listening || die "the sink does not listen"
}

load_sink_listening() {
	nsx "$NS_SRV" ss -Htln "sport = :$LOAD_SINK_PORT" | grep -q .
}

# load_sink_totals: "CONNECTIONS BYTES" the sink received.
load_sink_totals() {
	"$PY" -c '
import json, sys
n = b = 0
for line in open(sys.argv[1]):
    n += 1
    b += json.loads(line)["rx"]
print(n, b)' "$WORK/sink.json"
}

# ms_since T0: milliseconds since T0 (date +%s%N).
ms_since() {
	echo $((($(date +%s%N) - $1) / 1000000))
}

# load_start_roved: roved with $LOAD_CONF; the milliseconds until its
# control socket appeared in $ROVED_START_MS.
load_start_roved() {
	local t0 sock i
	sock=$(conf_path "$LOAD_CONF" ControlSocket)
	rm -f "$sock"
	t0=$(date +%s%N)
	GLIBC_TUNABLES=$ROVED_TUNABLES bg roved "$NS_SRV" "$BUILD/roved" -f -c "$LOAD_CONF" ${ROVE_VERBOSE:+-v}
	ROVED_PID=$BG_PID
	ROVED_SOCK=$sock
	for ((i = 0; i < 3000; i++)); do
		[ -S "$sock" ] && break
		kill -0 "$ROVED_PID" 2>/dev/null || die "roved exited at start"
		sleep 0.01
	done
	ROVED_START_MS=$(ms_since "$t0")
	wait_for 10 "roved's control socket $sock" status_ok "$NS_SRV" "$sock" ||
		die "roved did not come up"
}

# load_stop_roved: SIGTERM (it closes every connection) and wait, polling
# every 10 ms (not stop_pid's 100): a restart measures from the first
# lost session, and the next roved starts when this one is gone.
load_stop_roved() {
	local i
	kill -TERM "$ROVED_PID" 2>/dev/null
	for ((i = 0; i < 1000; i++)); do
		kill -0 "$ROVED_PID" 2>/dev/null || break
		sleep 0.01
	done
	stop_pid "$ROVED_PID"
	forget_pid "$ROVED_PID"
}

# load_run NAME N [OPTIONS...]: rove-load run against roved in the
# background, output in $WORK/NAME.log, PID in $LOAD_PID.
load_run() {
	local name=$1 n=$2
	shift 2
	bg "$name" "$NS_LOAD" "$BUILD/tests/rove-load" run -j "$LOAD_PROCS" \
		-s "$LOAD_SRV:$LOAD_PORT" -P "$SRV_PUB" -k "$LOAD_KEYS" -n "$n" \
		-b "$LOAD_SRC_FIRST" -B "$LOAD_PER_SRC" -R "$ROVED_PID" "$@"
	LOAD_PID=$BG_PID
}

# load_result NAME KEY: KEY's value in NAME.log's RESULT lines.
load_result() {
	sed -n 's/^RESULT .*\<'"$2"'=\([^ ]*\).*/\1/p' "$WORK/$1.log" | tail -n1
}

# load_wait_line NAME SECS TEXT: TEXT appears in NAME.log within SECS.
load_wait_line() {
	wait_for "$2" "'$3' from rove-load" grep -q "$3" "$WORK/$1.log"
}

# peer_states: "STATE COUNT" lines over roved's peers.
peer_states() {
	status "$NS_SRV" "$ROVED_SOCK" | "$PY" -c '
import collections, json, sys
c = collections.Counter(p["state"] for p in json.load(sys.stdin)["peers"])
for k in sorted(c):
    print(k, c[k])
'
}
