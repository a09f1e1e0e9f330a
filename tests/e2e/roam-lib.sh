# Topology and helpers for the roaming tests (tests/e2e/test-roam-*.sh) and
# bench/roam.sh: a client with two links behind a masquerading router, roved
# behind it, a LAN host behind roved, and optionally a delay on the router.
# Sources lib.sh (processes, waits, status queries) and adds its own
# namespaces; nothing is configured outside them.
#
#   +--- $RNS_C (client) ---+        +---- $RNS_R (NAT router) ----+
#   | rove, rove0 (laptop)  |        |  masquerade random out rs   |
#   | ca 198.18.10.2/24 ----|--------|- ra 198.18.10.1/24          |
#   | cb (198.18.11.x/24) --|--------|- rb 198.18.11.1/24          |
#   | default via link A    |        |  rs 198.18.20.1/24          |
#   +-----------------------+        |  [dA, dB: delay-relay TUNs] |
#                                    +-------------|---------------+
#   +--- $RNS_L (LAN host) --+       +---- $RNS_S (server) ---------+
#   | eth0 198.18.30.2/24 ---|-------|- eth1 198.18.30.1/24          |
#   | default via .30.1      |       |  eth0 198.18.20.2/24, roved   |
#   +------------------------+       |  rove0 (configs), forwarding  |
#                                    +-------------------------------+
#
# With a delay (roam_topo_up MS), packets the router forwards detour through
# tests/e2e/delay-relay, which holds each for MS milliseconds per direction
# (round trip 2*MS): `ip rule iif ra|rb lookup 100` sends client traffic
# into TUN dA and it leaves dB toward the server; `ip rule iif rs lookup
# 101` sends the de-masqueraded replies into dB and they leave dA toward the
# client. The two passes through the router are told apart by conntrack
# zones (zone 1 for dB and rs), so masquerading happens once, on the second.
# A LOSS_PERCENT (roam_topo_up MS LOSS) also has the relay drop that share
# of the packets at random, in each direction on its own; the relay is then
# started even when MS is 0. Its PRNG seed comes from $ROAM_SEED when the
# environment sets it (to repeat a run), else from the clock; the relay
# logs the seed it used. roam_delay_set swaps in a relay with other
# figures while everything else keeps running.
#
# Usage in a test:
#	. "$(dirname "$0")/roam-lib.sh"
#	roam_init "$@"            # BUILD_DIR; root and tool checks; trap
#	roam_topo_up [DELAY_MS [LOSS_PERCENT]]
#	roam_configs              # $RCONF_S, $RCONF_C from configs/ copies
#	roam_start_roved; roam_start_client; roam_wait_up
#	pass "what" / failc "what"; roam_finish   # "N passed, M failed"

# shellcheck disable=SC2034
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROAM_TOOL=$E2E_DIR/roam-tool.py
RNS_C=rove-$$-rc
RNS_R=rove-$$-rr
RNS_S=rove-$$-rs
RNS_L=rove-$$-rl

C_A=198.18.10.2       # client's address on link A
R_A=198.18.10.1
C_B=198.18.11.2       # client's address on link B (added by the tests)
R_B=198.18.11.1
R_S=198.18.20.1       # the router's (masquerading) address toward roved
S_OUT=198.18.20.2     # roved listens here
S_LAN=198.18.30.1
LAN=198.18.30.2
S_TUN=                # roved's and the laptop's tunnel addresses, from
C_TUN=                # the configs (roam_configs)
PORT=4433
FWD_PORT=7001         # LocalForward 127.0.0.1:7001 -> $LAN:7001

ROAM_PASSED=0
ROAM_FAILED=0
ROAM_REPORTED=0
RELAY=
RELAY_PID=
RELAY_RUNS=0
ROAM_DELAY=0
ROAM_LOSS=
ROAM_SEED=${ROAM_SEED:-}

pass() {
	printf 'PASS: %s\n' "$*"
	ROAM_PASSED=$((ROAM_PASSED + 1))
}

failc() {
	printf 'FAIL: %s\n' "$*"
	ROAM_FAILED=$((ROAM_FAILED + 1))
	E2E_FAILED=$((E2E_FAILED + 1))
}

# assert DESCRIPTION COMMAND...: PASS if COMMAND succeeds.
assert() {
	local what=$1
	shift
	if "$@"; then pass "$what"; else failc "$what"; fi
}

# assert_eq DESCRIPTION EXPECTED ACTUAL
assert_eq() {
	if [ "$2" = "$3" ]; then pass "$1 = $3"; else failc "$1: expected $2, got $3"; fi
}

# assert_cmp DESCRIPTION ACTUAL OP LIMIT: numeric comparison (OP: -le, -ge,
# -lt, -gt, -eq) on integers or decimals.
assert_cmp() {
	local what=$1 v=$2 op=$3 lim=$4 r
	case $op in
	-le) r='<=' ;; -ge) r='>=' ;; -lt) r='<' ;; -gt) r='>' ;; -eq) r='==' ;;
	*) die "assert_cmp: bad operator $op" ;;
	esac
	if [ -n "$v" ] && [ "$v" != null ] &&
		"$PY" -c "import sys; sys.exit(0 if float('$v') $r float('$lim') else 1)" 2>/dev/null; then
		pass "$what: $v $r $lim"
	else
		failc "$what: $v, expected $r $lim"
	fi
}

roam_report() {
	[ "$ROAM_REPORTED" = 1 ] && return
	ROAM_REPORTED=1
	# A check that died (lib.sh's die) counts as a failure too.
	[ "$E2E_FAILED" -gt "$ROAM_FAILED" ] && ROAM_FAILED=$E2E_FAILED
	printf '%d passed, %d failed\n' "$ROAM_PASSED" "$ROAM_FAILED"
}

roam_cleanup() {
	local rc=$?
	roam_report
	[ "$ROAM_FAILED" -gt 0 ] && [ "$rc" -eq 0 ] && rc=1
	(exit "$rc")
	e2e_cleanup
}

roam_finish() {
	roam_report
	[ "$ROAM_FAILED" -eq 0 ] || exit 1
	exit 0
}

roam_init() {
	e2e_init "$@"
	trap roam_cleanup EXIT
	local p
	for p in conntrack nft ping ip timeout; do
		command -v "$p" >/dev/null || die "$p is not installed (scripts/deps.sh installs it)"
	done
}

# roam_relay_bin: the delay relay of this build, else one compiled into the
# work directory (the Makefile builds BUILD_DIR/tests/delay-relay).
roam_relay_bin() {
	if [ -x "$BUILD/tests/delay-relay" ]; then
		RELAY=$BUILD/tests/delay-relay
		return
	fi
	RELAY=$WORK/delay-relay
	"${CC:-cc}" -std=c17 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror \
		-o "$RELAY" "$E2E_DIR/delay-relay.c" || die "cannot build delay-relay"
}

# roam_topo_up [DELAY_MS [LOSS_PERCENT]]: the namespaces of the diagram;
# DELAY_MS (one way) or LOSS_PERCENT puts the delay relay in the router.
roam_topo_up() {
	local ns
	ROAM_DELAY=${1:-0}
	ROAM_LOSS=${2:-}
	for ns in "$RNS_C" "$RNS_R" "$RNS_S" "$RNS_L"; do
		ns_add "$ns"
		nsx "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0 \
			net.ipv4.conf.default.rp_filter=0
	done
	# Deleting a primary address must leave the secondaries in place.
	nsx "$RNS_C" sysctl -qw net.ipv4.conf.all.promote_secondaries=1 \
		net.ipv4.conf.default.promote_secondaries=1
	veth "$RNS_C" ca "$RNS_R" ra
	veth "$RNS_C" cb "$RNS_R" rb
	veth "$RNS_R" rs "$RNS_S" eth0
	veth "$RNS_S" eth1 "$RNS_L" eth0
	nsx "$RNS_C" sysctl -qw net.ipv4.conf.ca.promote_secondaries=1 \
		net.ipv4.conf.cb.promote_secondaries=1
	ip -n "$RNS_C" addr add "$C_A/24" dev ca
	ip -n "$RNS_C" route add default via "$R_A" dev ca
	ip -n "$RNS_R" addr add "$R_A/24" dev ra
	ip -n "$RNS_R" addr add "$R_B/24" dev rb
	ip -n "$RNS_R" addr add "$R_S/24" dev rs
	ip -n "$RNS_S" addr add "$S_OUT/24" dev eth0
	ip -n "$RNS_S" addr add "$S_LAN/24" dev eth1
	ip -n "$RNS_L" addr add "$LAN/24" dev eth0
	ip -n "$RNS_L" route add default via "$S_LAN"
	nsx "$RNS_R" sysctl -qw net.ipv4.ip_forward=1
	nsx "$RNS_S" sysctl -qw net.ipv4.ip_forward=1
	nsx "$RNS_R" nft -f - <<-EOF || die "cannot load the router's nftables rules"
	table ip roam {
		chain post {
			type nat hook postrouting priority srcnat; policy accept;
			oifname "rs" masquerade random
		}
	}
	EOF
	if [ "$ROAM_DELAY" -gt 0 ] || [ -n "$ROAM_LOSS" ]; then
		roam_delay_up "$ROAM_DELAY" "$ROAM_LOSS"
	fi
	wait_for 10 "client reaches roved's address through the NAT" \
		quiet_ping "$RNS_C" "$S_OUT" || die "the client cannot reach $S_OUT"
	wait_for 10 "server reaches the LAN host" \
		quiet_ping "$RNS_S" "$LAN" || die "the server cannot reach $LAN"
}

quiet_ping() { nsx "$1" ping -c 1 -W 1 "$2" >/dev/null 2>&1; }

# roam_two_uplinks [two-nat]: link B up too, as a second uplink: both
# default routes, link A's preferred (metric 100 against 200). With
# `two-nat` link B's traffic leaves the router from a second public
# address ($R_S2), as behind another provider's NAT, so that roved sees the
# client move between addresses, not only ports.
R_S2=198.18.20.3
roam_two_uplinks() {
	ip -n "$RNS_C" addr add "$C_B/24" dev cb
	ip -n "$RNS_C" route del default via "$R_A" dev ca
	ip -n "$RNS_C" route add default via "$R_A" dev ca metric 100
	ip -n "$RNS_C" route add default via "$R_B" dev cb metric 200
	[ "${1:-}" = two-nat ] || return 0
	ip -n "$RNS_R" addr add "$R_S2/24" dev rs
	nsx "$RNS_R" nft -f - <<-EOF || die "cannot load link B's NAT rule"
	table ip roamb {
		chain post {
			type nat hook postrouting priority srcnat - 1; policy accept;
			ip saddr 198.18.11.0/24 oifname "rs" snat to $R_S2 random
		}
	}
	EOF
}

# roam_drop NAME on|off [RULES]: the router drops what RULES match (nft
# statements, one per line; default: everything through link A, which
# stays up with its routes: a silent uplink), in a table of its own.
roam_drop() {
	local name=$1 rules=${3:-$'iifname "ra" drop\noifname "ra" drop'}
	if [ "$2" = on ]; then
		nsx "$RNS_R" nft -f - <<-EOF
		table ip $name {
			chain through {
				type filter hook forward priority -10; policy accept;
				$rules
			}
		}
		EOF
	else
		nsx "$RNS_R" nft delete table ip "$name"
	fi
}

relay_ready() { grep -q '^ready' "$WORK/delay-relay.log" 2>/dev/null; }

# roam_relay_start MS [LOSS_PERCENT]: delay-relay with its TUN devices dA
# and dB, and the routes into them (which go when the devices go).
roam_relay_start() {
	RELAY_RUNS=$((RELAY_RUNS + 1))
	[ -f "$WORK/delay-relay.log" ] &&
		mv "$WORK/delay-relay.log" "$WORK/delay-relay-$((RELAY_RUNS - 1)).log"
	bg delay-relay "$RNS_R" "$RELAY" -t 3600 ${2:+-l "$2"} \
		${ROAM_SEED:+-s "$ROAM_SEED"} dA dB "$1"
	RELAY_PID=$BG_PID
	wait_for 10 "the delay relay" relay_ready || die "delay-relay did not start"
	nsx "$RNS_R" sysctl -qw net.ipv4.conf.dA.rp_filter=0 net.ipv4.conf.dB.rp_filter=0
	ip -n "$RNS_R" route add default dev dA table 100
	ip -n "$RNS_R" route add default dev dB table 101
}

# roam_delay_up MS [LOSS_PERCENT]: the delay relay and the policy routing
# that feeds it.
roam_delay_up() {
	roam_relay_bin
	roam_relay_start "$1" "${2:-}"
	# While no relay runs (roam_delay_set), these drop what would
	# otherwise fall through to the main table and get masqueraded in
	# the wrong conntrack zone, a mapping that would outlive the gap.
	ip -n "$RNS_R" route add blackhole default table 100 metric 4294967295
	ip -n "$RNS_R" route add blackhole default table 101 metric 4294967295
	ip -n "$RNS_R" rule add iif ra lookup 100 pref 100
	ip -n "$RNS_R" rule add iif rb lookup 100 pref 101
	ip -n "$RNS_R" rule add iif rs lookup 101 pref 102
	nsx "$RNS_R" nft -f - <<-EOF || die "cannot load the conntrack zone rules"
	table ip roamzone {
		chain pre {
			type filter hook prerouting priority raw; policy accept;
			iifname { "dB", "rs" } ct zone set 1
		}
		chain out {
			type filter hook output priority raw; policy accept;
			oifname "rs" ct zone set 1
		}
	}
	EOF
}

# roam_delay_set MS [LOSS_PERCENT]: replace the running relay with one
# holding packets MS ms and losing LOSS_PERCENT. The old relay's log,
# counters included, stays as delay-relay-N.log.
roam_delay_set() {
	[ -n "$RELAY_PID" ] || die "roam_delay_set: no delay relay runs"
	stop_pid "$RELAY_PID" || log "delay-relay exited with status $?"
	forget_pid "$RELAY_PID"
	RELAY_PID=
	ROAM_DELAY=$1
	ROAM_LOSS=${2:-}
	roam_relay_start "$ROAM_DELAY" "$ROAM_LOSS"
}

# roam_configs: $RCONF_S and $RCONF_C, the configs/ examples with this
# topology's addresses, a LocalForward to the LAN host and its permission.
roam_configs() {
	RCONF_S=$WORK/configs/roved.conf
	RCONF_C=$WORK/configs/rove.conf
	conf_set "$RCONF_S" Listen "$S_OUT:$PORT"
	conf_set "$RCONF_C" Server "$S_OUT:$PORT"
	# The tunnel addresses and subnet are the examples' own.
	S_TUN=$(awk -F'[=/ ]+' '/^\[Server\]/ { s = 1 } /^\[Peer\]/ { s = 0 }
		s && $1 == "Address" { print $2; exit }' "$RCONF_S")
	C_TUN=$(awk -F'[=/ ]+' '/^\[/ { p = 0 } $1 == "Name" && $2 == "laptop" { p = 1 }
		p && $1 == "Address" { print $2; exit }' "$RCONF_S")
	local net
	net=$(sed -n 's/^Routes *= *\([0-9.]*\/[0-9]*\).*/\1/p' "$RCONF_C" | head -n 1)
	[ -n "$S_TUN" ] && [ -n "$C_TUN" ] && [ -n "$net" ] ||
		die "cannot read the tunnel addresses from the example configs"
	conf_set "$RCONF_C" Routes "$net, 198.18.30.0/24"
	printf 'LocalForward = 127.0.0.1:%s = %s:%s\n' "$FWD_PORT" "$LAN" "$FWD_PORT" >>"$RCONF_C"
	awk -v line="AllowForward = 198.18.30.0/24:$FWD_PORT" '
		{ print }
		/^[[:space:]]*Name[[:space:]]*=[[:space:]]*laptop[[:space:]]*$/ { print line; n++ }
		END { exit n == 1 ? 0 : 1 }' "$RCONF_S" >"$RCONF_S.new" ||
		die "roved.conf has no peer laptop"
	mv "$RCONF_S.new" "$RCONF_S"
	ROVED_SOCK=$(conf_path "$RCONF_S" ControlSocket)
	LAP_SOCK=$(conf_path "$RCONF_C" ControlSocket)
	ROVED_STATE=$(conf_path "$RCONF_S" StateDir)
	LAP_STATE=$(conf_path "$RCONF_C" StateDir)
}

# server_key FILE KEY VALUE: set or add KEY in the [Server] section.
server_key() {
	if grep -q "^[[:space:]]*$2[[:space:]]*=" "$1"; then
		conf_set "$1" "$2" "$3"
	else
		sed -i "/^\\[Server\\]/a $2 = $3" "$1"
	fi
}

# client_key FILE KEY VALUE: set or add KEY (the [Client] section is the
# file's only one).
client_key() {
	if grep -q "^[[:space:]]*$2[[:space:]]*=" "$1"; then
		conf_set "$1" "$2" "$3"
	else
		printf '%s = %s\n' "$2" "$3" >>"$1"
	fi
}

# roam_start_roved: roved in the server namespace; $ROVED_PID. Its log goes
# to $WORK/roved.log (an earlier one is kept as roved-N.log).
ROVED_RUNS=0
roam_start_roved() {
	ROVED_RUNS=$((ROVED_RUNS + 1))
	[ -f "$WORK/roved.log" ] && mv "$WORK/roved.log" "$WORK/roved-$((ROVED_RUNS - 1)).log"
	bg roved "$RNS_S" "$BUILD/roved" -f -c "$RCONF_S" ${ROVE_VERBOSE:+-v}
	ROVED_PID=$BG_PID
	wait_for 10 "roved's control socket" status_ok "$RNS_S" "$ROVED_SOCK" ||
		die "roved did not come up"
}

# roam_start_client: rove up in the client namespace; $LAP_PID.
roam_start_client() {
	# Always -v: the client's path decisions are debug lines, and a
	# failed roaming check is hard to read without them.
	bg laptop "$RNS_C" "$BUILD/rove" up -f -c "$RCONF_C" -v
	LAP_PID=$BG_PID
}

# roam_kill_roved: SIGKILL, and the control socket it leaves behind goes.
roam_kill_roved() {
	kill -KILL "$ROVED_PID" 2>/dev/null
	wait "$ROVED_PID" 2>/dev/null
	forget_pid "$ROVED_PID"
	rm -f "$ROVED_SOCK"
}

# status_try NS SOCKET: rove status --json, asked up to 3 times; a failed
# query is logged with its error (a check then fails only on a wrong value,
# and a flaky control socket still shows in the log).
status_try() {
	local i out
	for ((i = 1; i <= 3; i++)); do
		if out=$(nsx "$1" "$BUILD/rove" status -s "$2" --json 2>"$WORK/status.err"); then
			printf '%s\n' "$out"
			return 0
		fi
		log "rove status -s $2 failed (try $i): $(head -c 300 "$WORK/status.err")"
		sleep 0.2
	done
	return 1
}

cget() { status_try "$RNS_C" "$LAP_SOCK" | jget "peers[0].$1" 2>/dev/null; }
sgetp() { status_try "$RNS_S" "$ROVED_SOCK" | jget "peers[name=laptop].$1" 2>/dev/null; }

client_state_is() { [ "$(cget state)" = "$1" ]; }
server_state_is() { [ "$(sgetp state)" = "$1" ]; }
# client_hs_is N: established on its Nth handshake.
client_hs_is() { client_state_is established && [ "$(cget handshakes)" = "$1" ]; }

tun_up() {
	ip -n "$RNS_C" -4 addr show dev rove0 2>/dev/null | grep -q "inet $C_TUN/"
}

# roam_wait_up: both ends established and the client's TUN configured.
roam_wait_up() {
	wait_for 15 "the client established" client_state_is established &&
		wait_for 10 "roved established" server_state_is established &&
		wait_for 10 "the client's rove0" tun_up
}

# roam_to_link_b: the client moves to link B: its address comes up there,
# link A's is deleted, and the default route follows.
roam_to_link_b() {
	ip -n "$RNS_C" addr add "$C_B/24" dev cb &&
		ip -n "$RNS_C" addr del "$C_A/24" dev ca &&
		ip -n "$RNS_C" route replace default via "$R_B" dev cb
}

# roam_echo_up: an echo server on the LAN host behind the LocalForward
# (every connection it accepts a line in $WORK/accepts), and rove's
# forward listening.
roam_echo_up() {
	bg echo-serve "$RNS_L" "$PY" "$E2E_DIR/fwd-peer.py" serve "$LAN:$FWD_PORT" --echo \
		--accepts "$WORK/accepts" --timeout 120
	wait_for 10 "the echo server" tcp_port_open "$RNS_L" "$FWD_PORT" ||
		die "the echo server does not listen"
	wait_for 10 "rove's LocalForward" tcp_port_open "$RNS_C" "$FWD_PORT" ||
		die "rove does not listen on 127.0.0.1:$FWD_PORT"
}

# roam_assert_no_tcp_race: rove never tried TLS over TCP (the session's
# QUIC coped on its own).
roam_assert_no_tcp_race() {
	if grep -q "(TLS over TCP) too" "$WORK/laptop.log"; then
		failc "rove raced TLS over TCP: $(grep -m1 "(TLS over TCP) too" "$WORK/laptop.log")"
	else
		pass "rove never raced TLS over TCP"
	fi
}

# ping_bg NAME SECONDS [DEST]: ping every 10 ms through the tunnel for
# SECONDS (ping slows down while no answers come, so a count would not
# bound the time), with timestamps (-D), into $WORK/NAME.log; PID in
# $PING_PID.
ping_bg() {
	bg "$1" "$RNS_C" ping -D -n -i 0.01 -W 1 -w "$2" "${3:-$S_TUN}"
	PING_PID=$BG_PID
}

# wait_exit PID SECONDS: wait for a background process to end on its own;
# its exit status, or 124 (and it is killed) when it overstays.
wait_exit() {
	local pid=$1 secs=$2 i
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		forget_pid "$pid"
		return 124
	fi
	wait "$pid"
	local rc=$?
	forget_pid "$pid"
	return $rc
}

# ready_in LOG: a tool of roam-tool.py said "ready".
ready_in() { grep -q '^ready' "$1" 2>/dev/null; }

# roam_fwd_sink: the transfer sink on the LAN host behind the client's
# LocalForward, and the forward itself listening.
roam_fwd_sink() {
	tool_bg xfer-serve "$RNS_L" xfer-serve "$LAN:$FWD_PORT" --timeout "${1:-200}"
	wait_for 10 "the transfer sink" ready_in "$WORK/xfer-serve.log" ||
		die "xfer-serve did not start"
	wait_for 10 "rove's LocalForward" tcp_port_open "$RNS_C" "$FWD_PORT" ||
		die "rove does not listen on 127.0.0.1:$FWD_PORT"
}

# traffic_start NAME SECONDS BYTES: a ping through the tunnel every 10 ms
# and a paced transfer of BYTES through the LocalForward, both for about
# SECONDS. traffic_end NAME T0 waits for both: $XFER and $GAPS (gaps
# --after T0) hold their results, logged.
traffic_start() {
	ping_bg "ping-$1" "$2"
	TRAFFIC_PING=$PING_PID
	tool_bg "xfer-$1" "$RNS_C" xfer-send "127.0.0.1:$FWD_PORT" "$3" \
		--duration $(($2 - 2)) --timeout 150
	TRAFFIC_XFER=$BG_PID
}
traffic_end() {
	wait_exit "$TRAFFIC_XFER" 150
	XFER=$(tail -n 1 "$WORK/xfer-$1.log")
	wait_exit "$TRAFFIC_PING" 60
	GAPS=$(tool gaps "$WORK/ping-$1.log" --after "$2")
	log "$1: ping $GAPS"
	log "$1: transfer $XFER"
}

local_ip() { local l; l=$(cget local); echo "${l%:*}"; }
client_local_is() { [ "$(local_ip)" = "$1" ]; }

# tool_bg NAME NS ARGS...: roam-tool.py ARGS in the background.
tool_bg() {
	local name=$1 ns=$2
	shift 2
	bg "$name" "$ns" "$PY" "$ROAM_TOOL" "$@"
}

tool() { "$PY" "$ROAM_TOOL" "$@"; }

# jf JSON PATH: one field of a JSON text.
jf() { printf '%s\n' "$1" | jget "$2" 2>/dev/null || echo missing; }

now_ns() { date +%s%N; }
now_s() { date +%s.%N; }

# ms_between NS_A NS_B: milliseconds from A to B.
ms_between() { echo $((($2 - $1) / 1000000)); }

# sanitizer_clean LOG WHAT: no ASan/UBSan report in a log.
sanitizer_clean() {
	if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$1" 2>/dev/null; then
		failc "$2: sanitizer report in its log"
		grep -E -A8 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$1" | head -n 40
	else
		pass "$2: no sanitizer report"
	fi
}

# roam_stop_all [close]: stop rove then roved with SIGTERM; both must exit 0
# with clean logs. With "close", roved must also learn from the client's
# CONNECTION_CLOSE that it left (within 2 s, far below any idle timeout).
roam_stop_all() {
	local rc=0 f
	stop_pid "$LAP_PID" || rc=$?
	forget_pid "$LAP_PID"
	assert_eq "rove exit status after SIGTERM" 0 "$rc"
	if [ "${1:-}" = close ]; then
		if wait_for 2 "roved to see the client's close" server_state_is closed; then
			pass "roved saw the client's close"
		else
			failc "roved shows the laptop $(sgetp state) 2 s after the client's SIGTERM (no CONNECTION_CLOSE arrived)"
		fi
	fi
	rc=0
	stop_pid "$ROVED_PID" || rc=$?
	forget_pid "$ROVED_PID"
	assert_eq "roved exit status after SIGTERM" 0 "$rc"
	sanitizer_clean "$WORK/laptop.log" rove
	for f in "$WORK"/roved*.log; do
		sanitizer_clean "$f" "$(basename "$f" .log)"
	done
}

# tcp_port_open NS PORT: something listens on TCP PORT in NS.
tcp_port_open() {
	[ -n "$(nsx "$1" ss -Hltn "sport = :$2" 2>/dev/null)" ]
}
