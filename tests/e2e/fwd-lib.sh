# Helpers for the port-forwarding tests (tests/e2e/test-fwd-*.sh): config
# variants, listening checks, forward counters, files under /etc/netns.
# Sources lib.sh (the topology) and adds nothing to it.
#
# Usage in a test:
#	. "$(dirname "$0")/fwd-lib.sh"
#	fwd_init "$@"             # e2e_init, tool checks, cleanup of /etc/netns
#	topo_up
#	peer_set laptop AllowForward "198.19.10.0/24:*"
#	client_add "$WORK/configs/rove.conf" "LocalForward = 7001 = $LAN_HOST:7001"
#	start_roved; start_client laptop; wait_established laptop

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FWD_PEER=$E2E_DIR/fwd-peer.py
FWD_ETC=()           # /etc/netns/NS directories this test made
FWD_ETC_TOP=0        # 1 if it made /etc/netns itself
FWD_CLEANUP=()       # more commands (eval'd) for the cleanup, run first

fwd_init() {
	e2e_init "$@"
	trap fwd_cleanup EXIT
	local p
	for p in ss timeout; do
		command -v "$p" >/dev/null || die "$p is not installed"
	done
}

# fwd_cleanup: remove the /etc/netns files, then the usual cleanup (which
# takes the exit status from $?, so keep it).
fwd_cleanup() {
	local rc=$? d
	for d in "${FWD_CLEANUP[@]}"; do
		eval "$d"
	done
	for d in "${FWD_ETC[@]}"; do
		rm -rf "$d"
	done
	[ "$FWD_ETC_TOP" = 1 ] && rmdir /etc/netns 2>/dev/null
	(exit "$rc")
	e2e_cleanup
}

# netns_etc NS FILE CONTENT: /etc/netns/NS/FILE replaces /etc/FILE for
# processes started afterwards with 'ip netns exec NS'.
netns_etc() {
	local d=/etc/netns/$1
	if [ ! -d /etc/netns ]; then
		mkdir /etc/netns || die "cannot create /etc/netns"
		FWD_ETC_TOP=1
	fi
	if [ ! -d "$d" ]; then
		mkdir "$d" || die "cannot create $d"
		FWD_ETC+=("$d")
	fi
	printf '%s\n' "$3" >"$d/$2" || die "cannot write $d/$2"
}

# peer_set NAME KEY VALUE [FILE]: KEY = VALUE in the [Peer] section whose
# Name is NAME of roved.conf (replacing KEY there if present).
peer_set() {
	local f=${4:-$WORK/configs/roved.conf}
	awk -v name="$1" -v key="$2" -v val="$3" '
		/^[[:space:]]*\[/ { peer = ($0 ~ /^[[:space:]]*\[Peer\]/); mine = 0 }
		peer && $0 ~ "^[[:space:]]*Name[[:space:]]*=[[:space:]]*" name "[[:space:]]*$" {
			print; print key " = " val; mine = 1; done = 1; next
		}
		mine && $0 ~ "^[[:space:]]*" key "[[:space:]]*=" { next }
		{ print }
		END { exit done ? 0 : 1 }' "$f" >"$f.new" ||
		die "peer_set: no peer $1 in $f"
	mv "$f.new" "$f"
}

# server_set KEY VALUE [FILE]: KEY = VALUE in the [Server] section.
server_set() {
	local f=${3:-$WORK/configs/roved.conf}
	awk -v key="$1" -v val="$2" '
		/^[[:space:]]*\[/ { srv = ($0 ~ /^[[:space:]]*\[Server\]/) }
		srv && $0 ~ "^[[:space:]]*" key "[[:space:]]*=" { next }
		{ print }
		/^[[:space:]]*\[Server\]/ { print key " = " val; done = 1 }
		END { exit done ? 0 : 1 }' "$f" >"$f.new" ||
		die "server_set: no [Server] section in $f"
	mv "$f.new" "$f"
}

# client_add FILE LINE...: append lines to a client config (its [Client]
# section is the only one).
client_add() {
	local f=$1 l
	shift
	for l in "$@"; do
		printf '%s\n' "$l" >>"$f"
	done
}

# tcp_listening NS PORT: something listens on TCP PORT in NS.
tcp_listening() {
	[ -n "$(nsx "$1" ss -Hltn "sport = :$2")" ]
}

# wait_listen NS PORT WHAT: bounded wait for a listener; dies without one.
wait_listen() {
	wait_for 10 "$3 listening on port $2" tcp_listening "$1" "$2" ||
		die "$3 does not listen on port $2"
}

# peer_bg NAME NS ARGS...: fwd-peer.py ARGS in the background (see bg).
peer_bg() {
	local name=$1 ns=$2
	shift 2
	bg "$name" "$ns" "$PY" "$FWD_PEER" "$@"
}

# peer_run NS SECS ARGS...: fwd-peer.py ARGS in NS, killed after SECS;
# stdout is the result (JSON).
peer_run() {
	local ns=$1 secs=$2
	shift 2
	nsx "$ns" timeout -k 5 "$secs" "$PY" "$FWD_PEER" "$@"
}

# lines FILE: number of lines in FILE (0 if missing).
lines() {
	if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi
}

has_lines() { [ "$(lines "$1")" -ge "$2" ]; }

# jfield JSON PATH: one value from a JSON text.
jfield() {
	printf '%s\n' "$1" | jget "$2" 2>/dev/null || echo missing
}

# Forward counters. The client's server is peers[0]; roved's laptop is
# peers[name=laptop].
lap_fc() { sget "$NS_LAP" "$LAP_SOCK" "peers[0].forward_counters.$1"; }
srv_fc() { sget "$NS_SRV" "$ROVED_SOCK" "peers[name=laptop].forward_counters.$1"; }
# UDP flow counters (opened, refused, expired, drops.CAUSE), the same way.
lap_uc() { sget "$NS_LAP" "$LAP_SOCK" "peers[0].udp_counters.$1"; }
srv_uc() { sget "$NS_SRV" "$ROVED_SOCK" "peers[name=laptop].udp_counters.$1"; }

# text NS SOCKET [ARGS...]: rove status (or roved's) as text.
text() {
	local ns=$1 sock=$2
	shift 2
	nsx "$ns" "$BUILD/rove" status -s "$sock" "$@"
}
# has WHAT TEXT LINE: TEXT has LINE, whole.
has() {
	if printf '%s\n' "$2" | grep -qxF -- "$3"; then ok "$1"
	else fail "$1: no line '$3' in: $2"; fi
}
# logged FILE TEXT WHAT: TEXT (a fixed string) shows up in FILE within 10 s.
logged() {
	if wait_for 10 "$3" grep -qF -- "$2" "$1"; then ok "$3"
	else fail "$3: no '$2' in $(basename "$1"): $(tail -n 5 "$1")"; fi
}

FWD_COUNTERS="opened completed reset refused unreachable denied timeout limit protocol name"

# counters_snapshot NS SOCK PEERPATH: "name=value ..." of every counter.
counters_snapshot() {
	status "$1" "$2" | "$PY" -c '
import json, sys
doc = json.load(sys.stdin)
path = sys.argv[1]
peers = doc["peers"]
if path == "first":
    p = peers[0]
else:
    p = [x for x in peers if x.get("name") == path][0]
c = p["forward_counters"]
print(" ".join("%s=%d" % (k, c[k]) for k in sys.argv[2].split()))
' "$3" "$FWD_COUNTERS"
}

# counters_delta BEFORE AFTER: the counters that changed, as "name+N ...",
# or "none".
counters_delta() {
	"$PY" -c '
import sys
b = dict(x.split("=") for x in sys.argv[1].split())
a = dict(x.split("=") for x in sys.argv[2].split())
d = ["%s%+d" % (k, int(a[k]) - int(b[k])) for k in a if a[k] != b.get(k)]
print(" ".join(d) if d else "none")
' "$1" "$2"
}

lap_counters() { counters_snapshot "$NS_LAP" "$LAP_SOCK" first; }
srv_counters() { counters_snapshot "$NS_SRV" "$ROVED_SOCK" laptop; }

# forwards_count NS SOCK PEERPATH [STATE [TARGET]]: number of forwards in
# the peer's "forwards" list (in STATE unless STATE is "" or absent; to
# TARGET if given).
forwards_count() {
	status "$1" "$2" | "$PY" -c '
import json, sys
doc = json.load(sys.stdin)
peers = doc["peers"]
p = peers[0] if sys.argv[1] == "first" else \
    [x for x in peers if x.get("name") == sys.argv[1]][0]
st = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
tg = sys.argv[3] if len(sys.argv) > 3 else None
print(sum(1 for f in p["forwards"] if (st is None or f["state"] == st) and
          (tg is None or f["target"] == tg)))
' "$3" "${@:4}"
}

# srv_forwards_are N [STATE [TARGET]], lap_forwards_are N [STATE [TARGET]]:
# roved lists N forwards for the laptop; rove lists N for its server.
srv_forwards_are() { [ "$(forwards_count "$NS_SRV" "$ROVED_SOCK" laptop "${@:2}")" = "$1" ]; }
lap_forwards_are() { [ "$(forwards_count "$NS_LAP" "$LAP_SOCK" first "${@:2}")" = "$1" ]; }

# srv_fwd_rx_over BYTES: roved has written more than BYTES to the targets
# of the laptop's current forwards (data is flowing).
srv_fwd_rx_over() {
	status "$NS_SRV" "$ROVED_SOCK" | "$PY" -c '
import json, sys
p = [x for x in json.load(sys.stdin)["peers"] if x["name"] == "laptop"][0]
sys.exit(0 if sum(f["rx_bytes"] for f in p["forwards"]) > int(sys.argv[1]) else 1)' "$1"
}

# rss_kb PID: VmRSS of PID in kB.
rss_kb() {
	awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}

# alive PID WHAT: check that PID still runs.
alive() {
	if kill -0 "$1" 2>/dev/null; then ok "$2 still runs"; else fail "$2 exited"; fi
}

# transfer_ok NS ADDR BYTES WHAT [ARGS...]: a fresh connection through a
# forward to a 'fwd-peer.py serve --echo' target echoes BYTES exactly (ARGS:
# more options of 'fwd-peer.py many', e.g. --socks TARGET).
transfer_ok() {
	local ns=$1 addr=$2 n=$3 what=$4 out
	shift 4
	out=$(peer_run "$ns" 60 many "$addr" --conns 1 --size "$n" --timeout 50 "$@")
	if [ "$(jfield "$out" ok)" = 1 ]; then
		ok "$what: $n bytes echoed through the forward"
	else
		fail "$what: echo through the forward: $out"
	fi
}

# stop_checked PID NAME: stop a rove or roved with SIGTERM; it must exit 0
# and its log must hold no sanitizer report.
stop_checked() {
	local rc=0
	stop_pid "$1" || rc=$?
	forget_pid "$1"
	expect_eq "$2 exit status after SIGTERM" 0 "$rc"
	if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$WORK/$2.log"; then
		fail "$2: sanitizer report in its log"
		grep -E -A5 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$WORK/$2.log" | head -n 30
	fi
}

# fwd_finish [CLIENT_LOG_NAME...]: stop the clients (default laptop) and
# roved, checked, then exit with the test's status.
fwd_finish() {
	local who
	for who in "${@:-laptop}"; do
		case $who in
		laptop) stop_checked "$LAP_PID" laptop ;;
		branch) stop_checked "$BR_PID" branch ;;
		*) stop_checked "${who#*=}" "${who%%=*}" ;;
		esac
	done
	stop_checked "$ROVED_PID" roved
	e2e_finish
}
