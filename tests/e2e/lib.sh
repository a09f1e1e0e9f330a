# Shared setup for the end-to-end tests: network namespaces, rove processes,
# status queries and bounded waits. Sourced by tests/e2e/test-*.sh and demo.sh.
#
# Topology (every namespace name carries the PID of the test, so runs never
# collide; nothing is configured outside these namespaces):
#
#                     $NS_SW: bridge br0
#          +-----------------+-----------------+
#          | p-srv           | p-lap           | p-br
#          |                 |                 |
#   eth0 198.18.1.1/24  eth0 198.18.1.2/24  eth0 198.18.1.3/24
#   +-- $NS_SRV ----+   +-- $NS_LAP ----+   +-- $NS_BR -----+
#   | roved         |   | rove (laptop) |   | rove (branch) |
#   | rove0         |   | rove0         |   | rove0         |
#   |  198.19.77.1/24 |   |  198.19.77.2    |   |  from the pool|
#   |  fd00:77::1/64|   |  fd00:77::2   |   |  (198.19.77.3)  |
#   | forwarding on |   +---------------+   | forwarding on |
#   +---------------+                       +---------------+
#   eth1 198.19.10.1/24                     eth1 198.19.20.1/24
#          |                                       |
#   eth0 198.19.10.2/24                     eth0 198.19.20.2/24
#   +-- $NS_LAN ----+                       +-- $NS_SITE ---+
#   | LAN host      |                       | site host     |
#   | default via   |                       | default via   |
#   | 198.19.10.1   |                       | 198.19.20.1   |
#   +---------------+                       +---------------+
#
# The laptop routes 198.19.77.0/24, fd00:77::/64 and 198.19.10.0/24 into its
# tunnel; the branch 198.19.77.0/24 and 198.19.10.0/24; roved routes the
# branch's AllowedIPs 198.19.20.0/24 to it.
#
# Usage in a test:
#	. "$(dirname "$0")/lib.sh"
#	e2e_init "$@"            # BUILD_DIR argument, root check, trap, work dir
#	topo_up                  # namespaces and links
#	start_roved              # roved with $WORK/configs/roved.conf
#	start_client laptop      # rove with rove.conf in $NS_LAP
#	wait_established ...
# Logs of every process started go to $WORK/*.log and are printed when the
# test fails.

# The variables set here are read by the scripts that source this file.
# shellcheck disable=SC2034
set -u

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$E2E_DIR/../.." && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

NS_SW=rove-$$-sw
NS_SRV=rove-$$-srv
NS_LAP=rove-$$-lap
NS_BR=rove-$$-br
NS_LAN=rove-$$-lan
NS_SITE=rove-$$-site
E2E_NAMESPACES=()
E2E_PIDS=()
E2E_FAILED=0
WORK=
BUILD=
TEST_NAME=$(basename "$0" .sh)

SRV_OUTER=198.18.1.1
LAP_OUTER=198.18.1.2
BR_OUTER=198.18.1.3
# The tunnel subnets of configs/roved.conf (Address = TUN_NET4.1/24,
# TUN_NET6::1/64).
TUN_NET4=198.19.77
TUN_NET6=fd00:77:
SRV_TUN4=$TUN_NET4.1
SRV_TUN6=$TUN_NET6:1
LAP_TUN4=$TUN_NET4.2
LAP_TUN6=$TUN_NET6:2
SRV_LAN=198.19.10.1
LAN_HOST=198.19.10.2
BR_SITE=198.19.20.1
SITE_HOST=198.19.20.2
MTU=1380

log() { printf '[%s] %s\n' "$TEST_NAME" "$*"; }

# fail MESSAGE: record a failed check; the test goes on so that one run shows
# every broken check, and exits non-zero at the end (e2e_finish).
fail() {
	printf '[%s] FAIL: %s\n' "$TEST_NAME" "$*"
	E2E_FAILED=$((E2E_FAILED + 1))
}

ok() { printf '[%s] ok: %s\n' "$TEST_NAME" "$*"; }

# die MESSAGE: a failure after which nothing else in the test makes sense.
die() {
	printf '[%s] FAIL: %s\n' "$TEST_NAME" "$*"
	E2E_FAILED=$((E2E_FAILED + 1))
	exit 1
}

# check DESCRIPTION COMMAND...: ok if COMMAND succeeds, else fail.
check() {
	local what=$1; shift
	if "$@"; then ok "$what"; else fail "$what"; fi
}

# expect_eq DESCRIPTION EXPECTED ACTUAL
expect_eq() {
	if [ "$2" = "$3" ]; then
		ok "$1 = $3"
	else
		fail "$1: expected '$2', got '$3'"
	fi
}

nsx() {
	local ns=$1; shift
	ip netns exec "$ns" "$@"
}

e2e_init() {
	if [ $# -lt 1 ]; then
		echo "usage: $0 BUILD_DIR" >&2
		exit 2
	fi
	if [ "$(id -u)" -ne 0 ]; then
		echo "$0: the end-to-end tests need root (network namespaces, TUN devices)" >&2
		exit 1
	fi
	BUILD=$(cd "$1" && pwd) || exit 2
	local p
	for p in roved rove; do
		[ -x "$BUILD/$p" ] || { echo "$0: $BUILD/$p is missing; run make first" >&2; exit 2; }
	done
	for p in ip ping nft; do
		command -v "$p" >/dev/null || { echo "$0: $p is not installed (scripts/deps.sh installs it)" >&2; exit 2; }
	done
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/rove-e2e.XXXXXX")
	# The configs' User = nobody must pass through it to reach its
	# StateDir and control socket.
	chmod 711 "$WORK"
	trap e2e_cleanup EXIT
	trap 'exit 130' INT TERM
	# Git does not keep file modes and rove refuses keys that others can read.
	cp -R "$TOP/configs" "$WORK/configs"
	chmod 600 "$WORK"/configs/keys/*.key
	if [ -n "${ROVE_TRANSPORT:-}" ]; then
		e2e_transport "$ROVE_TRANSPORT"
	fi
}

# e2e_transport quic|tcp|auto [ADDR]: the clients' Transport; roved also
# listens on TCP port 443 of ADDR (its outer address by default) and the
# clients' ServerTCP points there. ROVE_TRANSPORT=tcp in the environment
# runs any test over TLS on TCP.
e2e_transport() {
	local c addr=${2:-$SRV_OUTER}
	case $1 in
	quic|tcp|auto) ;;
	*) die "ROVE_TRANSPORT: '$1' is not quic, tcp or auto" ;;
	esac
	sed -i -e '/^ListenTCP = /d' -e "/^\[Server\]/a ListenTCP = $addr:443" \
		"$WORK/configs/roved.conf"
	for c in rove.conf rove2.conf; do
		sed -i -e '/^Transport = /d' -e '/^ServerTCP = /d' "$WORK/configs/$c"
		printf 'Transport = %s\nServerTCP = %s:443\n' "$1" "$addr" \
			>>"$WORK/configs/$c"
	done
	log "transport: $1"
}

# e2e_finish: the test's exit status from the checks it recorded.
e2e_finish() {
	if [ "$E2E_FAILED" -ne 0 ]; then
		log "$E2E_FAILED check(s) failed"
		exit 1
	fi
	exit 0
}

# stop_pid PID: SIGTERM, then SIGKILL after 5 s. Returns the exit status.
stop_pid() {
	local pid=$1 i rc
	kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return $?; }
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "PID $pid ignored SIGTERM for 5 s; killing it"
		kill -KILL "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	rc=$?
	return $rc
}

e2e_cleanup() {
	local rc=$? i ns f
	trap - EXIT INT TERM
	# Newest first: clients before the server they talk to.
	for ((i = ${#E2E_PIDS[@]} - 1; i >= 0; i--)); do
		stop_pid "${E2E_PIDS[i]}"
	done
	for ns in "${E2E_NAMESPACES[@]}"; do
		ip netns del "$ns" 2>/dev/null
	done
	if [ -n "$WORK" ] && [ -d "$WORK" ]; then
		if [ "$rc" -ne 0 ] || [ "$E2E_FAILED" -ne 0 ]; then
			for f in "$WORK"/*.log; do
				[ -s "$f" ] || continue
				echo "----- $(basename "$f") (last 40 lines) -----"
				tail -n 40 "$f"
			done
		fi
		if [ -n "${KEEP:-}" ]; then
			echo "work directory kept: $WORK"
		else
			rm -rf "$WORK"
		fi
	fi
	exit "$rc"
}

ns_add() {
	ip netns add "$1" || die "cannot create namespace $1"
	E2E_NAMESPACES+=("$1")
	nsx "$1" ip link set lo up
}

# veth NS_A NAME_A NS_B NAME_B: a veth pair between two namespaces.
veth() {
	ip -n "$1" link add "$2" type veth peer name "$4" netns "$3" ||
		die "cannot create veth $1/$2 <-> $3/$4"
	ip -n "$1" link set "$2" up
	ip -n "$3" link set "$4" up
}

# topo_up: the six namespaces of the diagram above.
topo_up() {
	local ns
	for ns in "$NS_SW" "$NS_SRV" "$NS_LAP" "$NS_BR" "$NS_LAN" "$NS_SITE"; do
		ns_add "$ns"
	done
	ip -n "$NS_SW" link add br0 type bridge || die "cannot create the bridge"
	ip -n "$NS_SW" link set br0 up
	veth "$NS_SW" p-srv "$NS_SRV" eth0
	veth "$NS_SW" p-lap "$NS_LAP" eth0
	veth "$NS_SW" p-br "$NS_BR" eth0
	for ns in p-srv p-lap p-br; do
		ip -n "$NS_SW" link set "$ns" master br0
	done
	ip -n "$NS_SRV" addr add "$SRV_OUTER/24" dev eth0
	ip -n "$NS_LAP" addr add "$LAP_OUTER/24" dev eth0
	ip -n "$NS_BR" addr add "$BR_OUTER/24" dev eth0

	veth "$NS_SRV" eth1 "$NS_LAN" eth0
	ip -n "$NS_SRV" addr add "$SRV_LAN/24" dev eth1
	ip -n "$NS_LAN" addr add "$LAN_HOST/24" dev eth0
	ip -n "$NS_LAN" route add default via "$SRV_LAN"
	nsx "$NS_SRV" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1

	veth "$NS_BR" eth1 "$NS_SITE" eth0
	ip -n "$NS_BR" addr add "$BR_SITE/24" dev eth1
	ip -n "$NS_SITE" addr add "$SITE_HOST/24" dev eth0
	ip -n "$NS_SITE" route add default via "$BR_SITE"
	nsx "$NS_BR" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1

	# The links are up once the outer addresses answer.
	wait_for 10 "server reaches laptop and branch on the outer link" \
		outer_ready || die "the outer network does not come up"
}

# udp_block on|off: the switch's bridge drops QUIC to and from roved's
# port 4433, or not (a network that blocks UDP; TLS over TCP still passes).
# forward_rules NS FAMILY TABLE on|off [RULE...]: a table TABLE (FAMILY
# bridge: the switch's bridge; inet: a router) in namespace NS whose
# forward hook applies each RULE (one nftables rule per argument) before
# anything else, at priority FORWARD_PRIORITY (-10); off deletes it.
forward_rules() {
	local ns=$1 family=$2 table=$3 what=$4 rules="" r
	shift 4
	if [ "$what" != on ]; then
		nsx "$ns" nft delete table "$family" "$table"
		return
	fi
	for r in "$@"; do
		rules+="$r"$'\n'
	done
	nsx "$ns" nft -f - <<-NFT
	table $family $table {
		chain through {
			type filter hook forward priority ${FORWARD_PRIORITY:--10}; policy accept;
			$rules
		}
	}
	NFT
}

# udp_block on|off: the switch drops UDP to and from roved's port.
udp_block() {
	forward_rules "$NS_SW" bridge rove_block "$1" \
		"ip daddr $SRV_OUTER udp dport 4433 drop" \
		"ip saddr $SRV_OUTER udp sport 4433 drop" || die "cannot block UDP ($1)"
}

# attacker_up NS NET.HOST...: namespace NS on the switch, with the given
# addresses of one /24 (the first is its source towards the server), and
# roved's route back to that /24; dies unless it reaches the server.
attacker_up() {
	local ns=$1 a
	shift
	ns_add "$ns"
	veth "$NS_SW" p-atk "$ns" eth0
	ip -n "$NS_SW" link set p-atk master br0
	for a in "$@"; do
		ip -n "$ns" addr add "$a/24" dev eth0 || die "cannot add $a"
	done
	ip -n "$ns" route add "${SRV_OUTER%.*}.0/24" dev eth0 src "$1"
	ip -n "$NS_SRV" route add "${1%.*}.0/24" dev eth0 ||
		die "cannot route ${1%.*}.0/24 to the namespace $ns"
	wait_for 10 "the namespace $ns reaches the server" \
		nsx "$ns" ping -c 1 -W 1 "$SRV_OUTER" >/dev/null 2>&1 ||
		die "the link of $ns does not come up"
}

outer_ready() {
	nsx "$NS_LAP" ping -c 1 -W 1 "$SRV_OUTER" >/dev/null 2>&1 &&
		nsx "$NS_BR" ping -c 1 -W 1 "$SRV_OUTER" >/dev/null 2>&1
}

# wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND every 0.1 s until it
# succeeds or SECONDS have passed.
wait_for() {
	local secs=$1 what=$2 i
	shift 2
	for ((i = 0; i < secs * 10; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	log "timed out after ${secs} s waiting for: $what"
	return 1
}

# bg NAME NS COMMAND...: start COMMAND in namespace NS in the background, its
# output in $WORK/NAME.log; the PID is in $BG_PID and stopped at cleanup.
bg() {
	local name=$1 ns=$2
	shift 2
	# ip netns exec execs the command, so $! is the program's own PID.
	ip netns exec "$ns" "$@" >"$WORK/$name.log" 2>&1 &
	BG_PID=$!
	E2E_PIDS+=("$BG_PID")
}

# stop_pids PID...: stop each (empty ones skipped) and forget it.
stop_pids() {
	local p
	for p in "$@"; do
		[ -n "$p" ] || continue
		stop_pid "$p"
		forget_pid "$p"
	done
}

# forget_pid PID: the test stops PID itself.
forget_pid() {
	local p keep=()
	for p in "${E2E_PIDS[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	E2E_PIDS=("${keep[@]}")
}

# start_roved [CONFIG]: roved in $NS_SRV; PID in $ROVED_PID.
start_roved() {
	local conf=${1:-$WORK/configs/roved.conf}
	bg roved "$NS_SRV" "$BUILD/roved" -f -c "$conf" ${ROVE_VERBOSE:+-v}
	ROVED_PID=$BG_PID
	ROVED_SOCK=$(conf_path "$conf" ControlSocket)
	wait_for 10 "roved's control socket $ROVED_SOCK" status_ok "$NS_SRV" "$ROVED_SOCK" ||
		die "roved did not come up"
}

# start_client laptop|branch [CONFIG]: rove up in that client's namespace;
# PID in $LAP_PID / $BR_PID, socket in $LAP_SOCK / $BR_SOCK.
start_client() {
	local who=$1 conf ns
	case $who in
	laptop) conf=${2:-$WORK/configs/rove.conf}; ns=$NS_LAP ;;
	branch) conf=${2:-$WORK/configs/rove2.conf}; ns=$NS_BR ;;
	*) die "start_client: unknown client $who" ;;
	esac
	shift $(($# < 2 ? $# : 2))
	bg "$who" "$ns" "$BUILD/rove" up -f -c "$conf" ${ROVE_VERBOSE:+-v} "$@"
	case $who in
	laptop) LAP_PID=$BG_PID; LAP_SOCK=$(conf_path "$conf" ControlSocket) ;;
	branch) BR_PID=$BG_PID; BR_SOCK=$(conf_path "$conf" ControlSocket) ;;
	esac
}

# conf_path CONFIG KEY: the value of KEY, made absolute against the config
# file's directory as rove resolves it.
conf_path() {
	local v
	v=$(sed -n "s/^[[:space:]]*$2[[:space:]]*=[[:space:]]*\\([^[:space:]#]*\\).*/\\1/p" "$1" | head -n1)
	case $v in
	/*) printf '%s\n' "$v" ;;
	*) printf '%s/%s\n' "$(cd "$(dirname "$1")" && pwd)" "$v" ;;
	esac
}

# conf_set FILE KEY VALUE: replace KEY's value (first occurrence) in FILE.
# server_blackhole on|off: every packet to and from roved's UDP port is
# dropped in the server's namespace (a path gone silent), or no longer.
server_blackhole() {
	if [ "$1" = on ]; then
		nsx "$NS_SRV" nft -f - <<-'NFT' || die "cannot load the blackhole"
		table inet rove_blackhole {
			chain in {
				type filter hook input priority 0; policy accept;
				udp dport 4433 drop
			}
			chain out {
				type filter hook output priority 0; policy accept;
				udp sport 4433 drop
			}
		}
		NFT
	else
		nsx "$NS_SRV" nft delete table inet rove_blackhole
	fi
}

conf_set() {
	sed -i "0,/^[[:space:]]*$2[[:space:]]*=.*/s||$2 = $3|" "$1"
	grep -q "^$2 = $3\$" "$1" || die "conf_set: $2 not found in $1"
}

status_ok() {
	nsx "$1" "$BUILD/rove" status -s "$2" --json >/dev/null 2>&1
}

# status NS SOCKET: rove status --json of the process behind SOCKET.
status() {
	nsx "$1" "$BUILD/rove" status -s "$2" --json
}

# jget PATH < JSON: one value from a status document (see jpath.py).
jget() {
	"$PY" "$E2E_DIR/jpath.py" "$1"
}

# sget NS SOCKET PATH: jget on a fresh status document.
sget() {
	status "$1" "$2" | jget "$3"
}

srv_get() { sget "$NS_SRV" "$ROVED_SOCK" "$1"; }

state_is() {
	[ "$(sget "$1" "$2" "$3" 2>/dev/null)" = "$4" ]
}

# wait_established laptop|branch: the client reports its server connection
# established and the server reports the peer established.
wait_established() {
	local who=$1 ns sock
	case $who in
	laptop) ns=$NS_LAP; sock=$LAP_SOCK ;;
	branch) ns=$NS_BR; sock=$BR_SOCK ;;
	esac
	wait_for 10 "$who reports its connection established" \
		state_is "$ns" "$sock" 'peers[0].state' established || return 1
	wait_for 10 "roved reports $who established" \
		state_is "$NS_SRV" "$ROVED_SOCK" "peers[name=$who].state" established
}

# ping_ok NS [ping options] DEST: no packet lost. On a loss, shows which
# replies came back and what every rove process counted.
ping_ok() {
	local ns=$1; shift
	local out
	out=$(nsx "$ns" ping -n -W 2 "$@" 2>&1)
	if ! printf '%s\n' "$out" | grep -q ' 0% packet loss'; then
		printf '%s\n' "$out" | sed 's/^/    /'
		dump_counters
		return 1
	fi
	return 0
}

# dump_counters: drops and datagrams lost of every process that answers.
dump_counters() {
	local ns sock
	for ns in "$NS_SRV:${ROVED_SOCK:-}" "$NS_LAP:${LAP_SOCK:-}" "$NS_BR:${BR_SOCK:-}"; do
		sock=${ns#*:}
		ns=${ns%%:*}
		[ -n "$sock" ] || continue
		status "$ns" "$sock" 2>/dev/null | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
print("    %s drops: %s" % (d["role"], {k: v for k, v in d["drops"].items() if v}))
for p in d["peers"]:
    print("      peer %s: %s, rx %d tx %d packets, datagrams_lost %s, drops %s" % (
        p["name"], p["state"], p["rx_packets"], p["tx_packets"],
        p.get("datagrams_lost"), {k: v for k, v in p["drops"].items() if v}))
' 2>/dev/null
	done
}

# tun_ready NS ADDR: ADDR is on rove0 and not tentative (IPv6 DAD done).
tun_ready() {
	local out
	out=$(ip -n "$1" addr show dev rove0 2>/dev/null) || return 1
	printf '%s\n' "$out" | grep -q "inet6\\? $2/" || return 1
	! printf '%s\n' "$out" | grep "inet6\\? $2/" | grep -q tentative
}

# up_all: roved, laptop and branch, established.
up_all() {
	start_roved
	start_client laptop
	start_client branch
	wait_established laptop || die "laptop's tunnel does not come up"
	wait_established branch || die "branch's tunnel does not come up"
	BR_TUN4=$(sget "$NS_BR" "$BR_SOCK" 'address[0]')
	BR_TUN4=${BR_TUN4%/*}
	log "branch got tunnel address $BR_TUN4"
}

# genkey FILE: a fresh private key (0600); prints the public key.
genkey() {
	(umask 077 && "$BUILD/rove" genkey >"$1") || die "rove genkey failed"
	"$BUILD/rove" pubkey <"$1" || die "rove pubkey failed"
}
