#!/usr/bin/env bash
# The TUN device and netlink layer against the real kernel: tun-probe drives
# tun.c, tun-netlink.c and tun-monitor.c in a fresh namespace, and `ip -j`
# checks what the kernel really holds after each step.
#
#   +------------------------- $NS ---------------------------+
#   | rove0 (TUN, held by tun-probe)  198.18.0.1/24            |
#   |                                 fd00:77::1/64            |
#   | v0 <-> v1 (veth)                198.18.1.1/24 on v0      |
#   |                                 fd00:1::1/64 on v0       |
#   | later: default via 198.18.1.254 and via fd00:1::fe on v0 |
#   |        (the outer path to a remote server, 198.18.200.5) |
#   +----------------------------------------------------------+
#
# usage: tests/e2e/test-tun.sh [BUILD_DIR]   (root; needs BUILD_DIR/tests/tun-probe)
# VERBOSE=1 also prints the error texts the kernel gave.
# e2e: light
set -u

TEST_NAME=test-tun
BUILD=${1:-build}
PROBE_BIN=$BUILD/tests/tun-probe
NS=rove-tun-$$
PASSED=0
FAILED=0
PROBE_ERR=
PROBE_CHILD=

log() { printf '[%s] %s\n' "$TEST_NAME" "$*"; }

if [ "$(id -u)" -ne 0 ]; then
	echo "$0: needs root (network namespaces, TUN devices)" >&2
	exit 1
fi
if [ ! -x "$PROBE_BIN" ]; then
	echo "$0: $PROBE_BIN is missing; run make $PROBE_BIN" >&2
	exit 2
fi
for p in ip jq; do
	command -v "$p" >/dev/null || { echo "$0: $p is not installed" >&2; exit 2; }
done

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$PROBE_CHILD" ] && kill -0 "$PROBE_CHILD" 2>/dev/null; then
		kill "$PROBE_CHILD" 2>/dev/null
		wait "$PROBE_CHILD" 2>/dev/null
	fi
	ip netns del "$NS" 2>/dev/null
	[ -n "$PROBE_ERR" ] && rm -f "$PROBE_ERR"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pass() { PASSED=$((PASSED + 1)); printf '[%s] ok: %s\n' "$TEST_NAME" "$1"; }
fail() { FAILED=$((FAILED + 1)); printf '[%s] FAIL: %s\n' "$TEST_NAME" "$1"; }

die() {
	fail "$*"
	if [ -s "$PROBE_ERR" ]; then
		echo "----- tun-probe stderr (last 40 lines) -----"
		tail -n 40 "$PROBE_ERR"
	fi
	echo "$PASSED passed, $FAILED failed"
	exit 1
}

# expect DESCRIPTION EXPECTED ACTUAL
expect() {
	if [ "$2" = "$3" ]; then
		pass "$1"
	else
		fail "$1: expected '$2', got '$3'"
	fi
}

# expect_prefix DESCRIPTION PREFIX ACTUAL: for kernel messages whose tail
# (the extended-ack text) differs between kernel versions.
expect_prefix() {
	[ -n "${VERBOSE:-}" ] && log "reply: $3"
	case $3 in
	"$2"*) pass "$1" ;;
	*) fail "$1: expected '$2...', got '$3'" ;;
	esac
}

# say COMMAND: one command to the probe; its answer lands in $REPLY.
say() {
	{ printf '%s\n' "$1" 1>&"$P_IN"; } 2>/dev/null || die "probe is gone (command: $1)"
	IFS= read -r -t 10 REPLY <&"$P_OUT" || REPLY="(no answer)"
}

# run DESCRIPTION COMMAND EXPECTED
run() {
	say "$2"
	expect "$1" "$3" "$REPLY"
}

nsip() { ip -n "$NS" "$@"; }

# Helpers printing what the kernel holds, in one line.
addrs() {
	nsip -j addr show dev rove0 |
		jq -r '[.[0].addr_info[] | "\(.local)/\(.prefixlen)"] | join(" ")'
}
link_field() { nsip -j link show dev rove0 | jq -r ".[0].$1"; }
is_up() { nsip -j link show dev rove0 | jq -r '.[0].flags | index("UP") != null'; }
# routes4/routes6 [SELECTOR...]: static routes as "dst gateway dev scope".
routes4() {
	nsip -j -4 route show proto static "$@" |
		jq -r '[.[] | "\(.dst) \(.gateway // "-") \(.dev) \(.scope // "global")"] | join(", ")'
}
routes6() {
	nsip -j -6 route show proto static "$@" |
		jq -r '[.[] | "\(.dst) \(.gateway // "-") \(.dev) \(.metric)"] | join(", ")'
}
field() { printf '%s\n' "$REPLY" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
# at_least_1 VALUE: "1" if VALUE >= 1, else VALUE itself (for the message).
at_least_1() { if [ "${1:-0}" -ge 1 ] 2>/dev/null; then echo 1; else echo "${1:-none}"; fi; }

# ---- namespace -----------------------------------------------------------
ip netns add "$NS" || die "cannot create namespace $NS"
nsip link set lo up
# No automatic link-local addresses: the addresses on rove0 are exactly
# the ones the probe adds, and no stray IPv6 notifications arrive late.
ip netns exec "$NS" sysctl -qw net.ipv6.conf.default.addr_gen_mode=1 ||
	die "cannot set addr_gen_mode"
nsip link add v0 type veth peer name v1 || die "cannot create veth"
nsip link set v0 up
nsip link set v1 up
nsip addr add 198.18.1.1/24 dev v0
nsip addr add fd00:1::1/64 dev v0 nodad

PROBE_ERR=$(mktemp "${TMPDIR:-/tmp}/rove-tun-probe.XXXXXX")
coproc PROBE { exec ip netns exec "$NS" "$PROBE_BIN" 2>"$PROBE_ERR"; }
# Bash drops PROBE and PROBE_PID when the probe exits; keep copies.
P_IN=${PROBE[1]:-}
P_OUT=${PROBE[0]:-}
PROBE_CHILD=${PROBE_PID:-}
if [ -z "$P_IN" ] || [ -z "$PROBE_CHILD" ]; then
	die "tun-probe did not start"
fi

# ---- tun_open ------------------------------------------------------------
run "name too long" "open abcdefghijklmnopq" \
	"error TUN device name too long (at most 15 characters): abcdefghijklmnopq"
run "name the kernel refuses" "open bad/name" \
	"error creating TUN device bad/name: Invalid argument"
nsip tuntap add mode tap name rtap0 || die "cannot create a TAP device"
run "a TAP device is not a TUN" "open rtap0" \
	"error creating TUN device rtap0: Invalid argument"
say "open rove%d"
IFINDEX=$(nsip -j link show dev rove0 2>/dev/null | jq -r '.[0].ifindex')
expect "open rove%d" "ok rove0 $IFINDEX" "$REPLY"
expect "rove0 is a TUN device" "tun" \
	"$(nsip -j -d link show dev rove0 | jq -r '.[0].linkinfo.info_kind')"
expect "rove0 has no packet-information header" "false" \
	"$(nsip -j -d link show dev rove0 | jq -r '.[0].linkinfo.info_data.pi')"
run "monitor starts" "monitor" "ok"
run "self-freeing monitor starts" "oneshot" "ok"
run "no IPv4 route" "get 203.0.113.1" \
	"error getting route to 203.0.113.1: Network is unreachable"
run "no IPv6 route" "get 2001:db8::1" \
	"error getting route to 2001:db8::1: Network is unreachable"

# ---- read and write while down --------------------------------------------
run "read with nothing waiting returns 0" "read" "ok 0"
run "write while the link is down" "write 450000140000400040010000c6120002c6120001" \
	"error Input/output error"

# ---- addresses -------------------------------------------------------------
run "add IPv4 address" "addr 198.18.0.1/24" "ok"
run "add IPv6 address" "addr fd00:77::1/64" "ok"
# The IPv4 address brings its local route (table local) along.
run "one address and one route event, coalesced" "events" \
	"ok link=0 address=1 route=1"
# Address and route were pending together; after the first callback freed
# its monitor the second was not delivered (a sanitizer build would catch
# a use after free).
run "a callback may free its monitor" "oneshot-count" "ok 1"
say "addr 198.18.0.1/24"
expect_prefix "duplicate address" \
	"error adding address 198.18.0.1/24 to rove0: File exists" "$REPLY"
say "addr-on 9999 198.18.9.1/24"
expect_prefix "address on a missing interface" \
	"error adding address 198.18.9.1/24 to ifindex 9999: No such device" "$REPLY"

# ---- MTU and link up -------------------------------------------------------
say "mtu 10"
expect_prefix "MTU below the minimum" \
	"error setting MTU 10 and link up on rove0: Invalid argument" "$REPLY"
expect "failed call left the MTU" "1500" "$(link_field mtu)"
expect "failed call left the link down" "false" "$(is_up)"
run "set MTU 1380 and up" "mtu 1380" "ok"
expect "MTU" "1380" "$(link_field mtu)"
expect "link is UP" "true" "$(is_up)"
say "wait-events link,route 3000"
expect "link event on link up" "1" "$(at_least_1 "$(field link)")"
expect "route event on link up" "1" "$(at_least_1 "$(field route)")"
expect "addresses on rove0" "198.18.0.1/24 fd00:77::1/64" "$(addrs)"

# ---- packets through the TUN -------------------------------------------------
run "write a packet that is not IP" "write 00112233" "error Invalid argument"
run "IPv4 echo written to the TUN is answered through it" \
	"ping 198.18.0.2 198.18.0.1" "ok reply"
run "IPv6 echo written to the TUN is answered through it" \
	"ping fd00:77::2 fd00:77::1" "ok reply"

# ---- routes through the TUN ----------------------------------------------------
run "add IPv4 route" "route 198.19.0.0/24" "ok"
run "add IPv6 route" "route fd00:99::/64" "ok"
expect "IPv4 route in the kernel" "198.19.0.0/24 - rove0 link" "$(routes4 198.19.0.0/24)"
expect "IPv6 route in the kernel" "fd00:99::/64 - rove0 1024" "$(routes6 fd00:99::/64)"
say "route 198.19.0.0/24"
expect_prefix "duplicate IPv4 route" \
	"error adding route 198.19.0.0/24 dev rove0: File exists" "$REPLY"
say "route fd00:99::/64"
expect_prefix "duplicate IPv6 route" \
	"error adding route fd00:99::/64 dev rove0: File exists" "$REPLY"
run "route with host bits" "route 198.19.0.1/24" \
	"error adding route 198.19.0.1/24: host bits set"
run "IPv6 route with host bits" "route fd00:99::1/64" \
	"error adding route fd00:99::1/64: host bits set"

# Twenty routes in a row reach the monitor as one route event.
say "events"
run "add 20 routes" "routes 198.19.100.0/24 20" "ok"
say "events"
expect "20 route changes, one route event" "1" "$(field route)"
expect "no address event" "0" "$(field address)"
expect "21 static routes on rove0" "21" \
	"$(nsip -j -4 route show proto static dev rove0 | jq length)"

say "delroute 198.19.99.0/24"
expect_prefix "delete a missing route" \
	"error deleting route 198.19.99.0/24 dev rove0: No such process" "$REPLY"
run "delete IPv4 route" "delroute 198.19.0.0/24" "ok"
run "delete IPv6 route" "delroute fd00:99::/64" "ok"
expect "IPv4 route gone" "" "$(routes4 198.19.0.0/24)"
expect "IPv6 route gone" "" "$(routes6 fd00:99::/64)"
say "delroute fd00:99::/64"
expect_prefix "delete a missing IPv6 route" \
	"error deleting route fd00:99::/64 dev rove0: No such process" "$REPLY"

# A route someone else owns is never replaced.
nsip route add 198.51.100.0/24 via 198.18.1.254 dev v0 || die "cannot add route"
say "route 198.51.100.0/24"
expect_prefix "route over a foreign one is refused" \
	"error adding route 198.51.100.0/24 dev rove0: File exists" "$REPLY"
expect "the foreign route is intact" "198.51.100.0/24 via 198.18.1.254 dev v0" \
	"$(nsip route show 198.51.100.0/24 | sed 's/ *$//')"

# ---- route lookup and host routes ---------------------------------------------
nsip route add default via 198.18.1.254 dev v0 || die "cannot add default route"
nsip -6 route add default via fd00:1::fe dev v0 || die "cannot add IPv6 default route"
run "route to a TUN neighbour" "get 198.18.0.77" \
	"ok gw=- dev=rove0 src=198.18.0.1"
run "direct host route" "host 198.18.0.77" "ok"
expect "direct host route in the kernel" "198.18.0.77 - rove0 link" \
	"$(routes4 198.18.0.77/32)"
run "delete direct host route" "delhost 198.18.0.77" "ok"
expect "direct host route gone" "" "$(routes4 198.18.0.77/32)"

run "route through a gateway" "get 198.18.200.5" \
	"ok gw=198.18.1.254 dev=v0 src=198.18.1.1"
run "host route through the gateway" "host 198.18.200.5" "ok"
run "adding it again replaces it" "host 198.18.200.5" "ok"
expect "one host route through the gateway" "198.18.200.5 198.18.1.254 v0 global" \
	"$(routes4 198.18.200.5/32)"
# The tunnel now claims the whole remote network; the host route keeps
# the tunnel's own packets on the outer path.
run "broader route into the tunnel" "route 198.18.200.0/24" "ok"
run "host route still wins" "get 198.18.200.5" \
	"ok gw=198.18.1.254 dev=v0 src=198.18.1.1"

run "IPv6 route through a gateway" "get fd00:200::5" \
	"ok gw=fd00:1::fe dev=v0 src=fd00:1::1"
run "IPv6 host route through the gateway" "host fd00:200::5" "ok"
run "adding it again replaces it" "host fd00:200::5" "ok"
expect "one IPv6 host route" "fd00:200::5 fd00:1::fe v0 1024" \
	"$(routes6 fd00:200::5/128)"

# Roaming: the same host routes along a new path replace the old ones.
run "new IPv4 path" "get 198.18.0.9" "ok gw=- dev=rove0 src=198.18.0.1"
run "host route along the new path" "host 198.18.200.5" "ok"
expect "IPv4 host route replaced" "198.18.200.5 - rove0 link" \
	"$(routes4 198.18.200.5/32)"
run "new IPv6 path" "get fd00:77::9" "ok gw=- dev=rove0 src=fd00:77::1"
run "IPv6 host route along the new path" "host fd00:200::5" "ok"
expect "IPv6 host route replaced" "fd00:200::5 - rove0 1024" \
	"$(routes6 fd00:200::5/128)"
run "delete IPv4 host route" "delhost 198.18.200.5" "ok"
run "delete IPv6 host route" "delhost fd00:200::5" "ok"
expect "IPv4 host route gone" "" "$(routes4 198.18.200.5/32)"
expect "IPv6 host route gone" "" "$(routes6 fd00:200::5/128)"
say "delhost 198.18.200.5"
expect_prefix "delete a missing host route" \
	"error deleting host route 198.18.200.5/32 dev rove0: No such process" "$REPLY"
run "lookup follows the tunnel route now" "get 198.18.200.5" \
	"ok gw=- dev=rove0 src=198.18.0.1"

run "local address" "get 198.18.0.1" "ok gw=- dev=lo src=198.18.0.1"
nsip route add blackhole 192.0.2.0/24
say "get 192.0.2.1"
expect_prefix "blackhole route is an error" \
	"error getting route to 192.0.2.1: " "$REPLY"

# ---- close -------------------------------------------------------------------
say "events"
run "close" "close" "ok"
say "wait-events link 3000"
expect "link event when the TUN goes away" "1" "$(at_least_1 "$(field link)")"
expect "rove0 is gone" "" "$(nsip -j link show dev rove0 2>/dev/null)"
expect "its routes went with it" "" "$(routes4)"
run "read after close" "read" "error Bad file descriptor"

# Attaching to a persistent TUN device; it outlives our descriptor.
nsip tuntap add mode tun name rpers0 || die "cannot create a persistent TUN"
say "open rpers0"
expect "attach to a persistent TUN" \
	"ok rpers0 $(nsip -j link show dev rpers0 | jq -r '.[0].ifindex')" "$REPLY"
run "close it" "close" "ok"
expect "the persistent TUN stays" "rpers0" \
	"$(nsip -j link show dev rpers0 | jq -r '.[0].ifname')"

# The probe exits cleanly: no sanitizer report, no leak.
exec {P_IN}>&-
wait "$PROBE_CHILD"
expect "probe exit status" "0" "$?"
PROBE_CHILD=
# Its one line: the persistent device was said to be adopted.
expect "probe stderr: only the persistent device's adoption" \
	"rove: rpers0: a persistent TUN device made beforehand (ip tuntap): used as it is, and left in place at exit" \
	"$(sed 's/^[0-9-]* [0-9:.]* //' "$PROBE_ERR")"

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
