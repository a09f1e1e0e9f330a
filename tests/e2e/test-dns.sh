#!/usr/bin/env bash
# DNS through the tunnel. roved sends DNS = 198.19.77.1, fd00:77::1 and
# DNSSearch = corp.example, example.org; the laptop (User = nobody, as in
# every test) runs in a mount namespace of its own, with a private
# /etc/resolv.conf (a file in the work directory, bind-mounted) and a
# tmpfs over /run, so nothing here can reach the host's resolver.
#
# resolvconf is a stand-in placed first in PATH (Debian's resolvconf
# package would turn the host's /etc/resolv.conf into a link when it is
# installed): it logs each call (its uid, arguments and input), keeps
# each interface's lines and writes them into the private resolv.conf as
# the real one would. systemd-resolved is tests/e2e/fake-resolved on a
# private dbus-daemon, which logs the D-Bus calls it gets.
#
# 1. resolvconf: applied while up (exact input, as root through the
#    helper while rove runs as nobody), a name resolves through the
#    tunnel to the DNS server behind it (search domain included), status
#    shows it; a clean exit restores it.
# 2. rove killed (SIGKILL): its helper restores at once.
# 3. rove and its helper killed: the next start undoes the change from
#    its note in StateDir before it applies again. A forged note (another
#    device, or written by nobody) is ignored, and said to be.
# 4. DNS = no: nothing is called, nothing changes.
# 5. resolved (preferred over resolvconf when it runs): SetLinkDNS and
#    SetLinkDomains on rove0's ifindex, RevertLink on exit and when rove
#    is killed; a refusal leaves the tunnel working, status "failed".
# 6. Neither there: a warning, status "failed", the tunnel works.
# e2e: light
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
command -v dbus-daemon >/dev/null || die "dbus-daemon is not installed (scripts/deps.sh installs it)"
[ -x "$BUILD/tests/fake-resolved" ] || die "$BUILD/tests/fake-resolved is missing; run make check-e2e"
topo_up
C=$WORK/configs
STATE=$(conf_path "$C/rove.conf" StateDir)

# The DNS keys belong in [Server], which ends where the first [Peer] starts.
sed -i '0,/^\[Peer\]/s//DNS = 198.19.77.1, fd00:77::1\nDNSSearch = Corp.Example\nDNSSearch = example.org\n\n[Peer]/' "$C/roved.conf"
grep -q '^DNSSearch = example.org$' "$C/roved.conf" || die "cannot add DNS to roved.conf"

HOST_RESOLV_SUM=$(sha256sum /etc/resolv.conf | cut -d' ' -f1)
RESOLV=$WORK/resolv.conf
ORIG_RESOLV=$'# the private resolv.conf of test-dns\nnameserver 192.0.2.99\n'
printf '%s' "$ORIG_RESOLV" >"$RESOLV"
CALLS=$WORK/resolvconf.calls
RC_STATE=$WORK/resolvconf.d
mkdir -p "$WORK/bin" "$RC_STATE" "$WORK/nobin"
: >"$CALLS"

# The stand-in resolvconf: -a NAME reads the lines, -d NAME [-f] drops
# them; then resolv.conf is every interface's lines, then the original.
cat >"$WORK/bin/resolvconf" <<EOF
#!/bin/bash
set -u
input=
# Every byte of the input, its last newline included.
if [ "\${1:-}" = -a ]; then input=\$(cat; echo x); input=\${input%x}; fi
printf 'uid=%s %s | %s\n' "\$(id -u)" "\$*" "\$(printf '%s' "\$input" | tr '\n' ';')" >>"$CALLS"
case "\${1:-}" in
-a) [ \$# -eq 2 ] || exit 2; printf '%s' "\$input" >"$RC_STATE/\$2" ;;
-d) [ -e "$RC_STATE/\$2" ] || [ "\${3:-}" = -f ] || { echo "no such interface \$2"; exit 1; }
    rm -f "$RC_STATE/\$2" ;;
*) echo "unknown command \$*"; exit 2 ;;
esac
{ cat "$RC_STATE"/* 2>/dev/null; printf '%s' "$ORIG_RESOLV"; } >/etc/resolv.conf
EOF
chmod 755 "$WORK/bin/resolvconf"

# resolvconf's interface-order, as rove reads it (wg-quick's rule).
RC_PREFIX=$(sed -n 's/^\([A-Za-z0-9-]\{1,\}\)\*$/\1./p' /etc/resolvconf/interface-order 2>/dev/null | head -n 1)
RC_NAME=${RC_PREFIX}rove0
WANT_INPUT='nameserver 198.19.77.1;nameserver fd00:77::1;search corp.example example.org;'
WANT_RESOLV="nameserver 198.19.77.1
nameserver fd00:77::1
search corp.example example.org
${ORIG_RESOLV%$'\n'}"

# start_lap PATH [BUS_ADDRESS]: the laptop in its own mount namespace;
# its log is $WORK/laptop-$RUN.log.
RUN=0
start_lap() {
	local path=$1 bus=${2:-unix:path=$WORK/no-bus.sock}
	RUN=$((RUN + 1))
	# ip netns exec, unshare, sh and env each exec the next: $! is rove.
	# Where /etc/resolv.conf leads, also when it is a link into /run
	# (systemd-resolved's stub file): that place gets the private file.
	bg "laptop-$RUN" "$NS_LAP" unshare -m --propagation private sh -c '
		target=$(readlink -f /etc/resolv.conf) &&
		mount -t tmpfs -o mode=0755 tmpfs /run &&
		case $target in
		/run/*) mkdir -p "${target%/*}" && : >"$target" ;;
		esac &&
		mount --bind "$1" "$target" &&
		exec env PATH="$2" DBUS_SYSTEM_BUS_ADDRESS="$3" "$4" up -f -c "$5" $6' \
		sh "$RESOLV" "$path" "$bus" "$BUILD/rove" "$C/rove.conf" "${ROVE_VERBOSE:+-v}"
	LAP_PID=$BG_PID
	LAP_SOCK=$(conf_path "$C/rove.conf" ControlSocket)
	wait_established laptop || die "the laptop's tunnel does not come up"
}

# stop_lap: SIGTERM; exit 0 expected.
stop_lap() {
	local rc=0
	stop_pid "$LAP_PID" || rc=$?
	forget_pid "$LAP_PID"
	expect_eq "rove's exit status after SIGTERM" 0 "$rc"
}

# helper_pid: the DNS helper, rove's child.
helper_pid() {
	local p
	for p in $(cat "/proc/$LAP_PID/task/"*/children 2>/dev/null); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = rove-dns ] && { echo "$p"; return 0; }
	done
	return 1
}

calls() { wc -l <"$CALLS"; }
call() { sed -n "${1}p" "$CALLS"; }
ncalls_is() { [ "$(calls)" -eq "$1" ]; }
lap_dns() { sget "$NS_LAP" "$LAP_SOCK" "dns.$1"; }
note_absent() { [ ! -e "$STATE/dns" ]; }
pid_gone() { ! kill -0 "$1" 2>/dev/null; }
host_resolv_untouched() { [ "$(sha256sum /etc/resolv.conf | cut -d' ' -f1)" = "$HOST_RESOLV_SUM" ]; }

start_roved
bg dns-responder "$NS_SRV" "$PY" "$E2E_DIR/dns-responder.py" "$SRV_TUN4" \
	www.corp.example 198.19.10.2 "$WORK/dns-queries.log" 240
wait_for 10 "the DNS responder" grep -q ready "$WORK/dns-responder.log" ||
	die "the DNS responder does not start"

# 1. resolvconf.
start_lap "$WORK/bin:/usr/bin:/bin"
wait_for 5 "resolvconf -a" ncalls_is 1 || true
expect_eq "resolvconf calls once up" 1 "$(calls)"
expect_eq "resolvconf -a, as root, with the server's lines" \
	"uid=0 -a $RC_NAME | $WANT_INPUT" "$(call 1)"
expect_eq "the private resolv.conf while up" "$WANT_RESOLV" "$(cat "$RESOLV")"
expect_eq "dns.state" applied "$(lap_dns state)"
expect_eq "dns.backend" resolvconf "$(lap_dns backend)"
expect_eq "dns.servers" '["198.19.77.1","fd00:77::1"]' "$(lap_dns servers)"
expect_eq "dns.search" '["corp.example","example.org"]' "$(lap_dns search)"
expect_eq "StateDir note" "resolvconf $RC_NAME" "$(cat "$STATE/dns" 2>/dev/null)"
HELPER=$(helper_pid) || fail "no DNS helper under rove (PID $LAP_PID)"
if [ -n "${HELPER:-}" ]; then
	expect_eq "the DNS helper's uids (root: resolvconf writes /run and /etc)" \
		"0 0 0 0" "$(awk '$1 == "Uid:" { print $2, $3, $4, $5 }' "/proc/$HELPER/status")"
	expect_eq "the helper's open descriptors (0-2 and its socket)" "0 1 2 3" \
		"$(ls "/proc/$HELPER/fd" | sort -n | tr '\n' ' ' | sed 's/ $//')"
fi
expect_eq "rove's own uid" "$(id -u nobody)" \
	"$(awk '$1 == "Uid:" { print $2 }' "/proc/$LAP_PID/status")"
text_dns() { nsx "$NS_LAP" "$BUILD/rove" status -s "$LAP_SOCK" | grep '^  dns: '; }
expect_eq "the text status" "  dns: applied (resolvconf): 198.19.77.1, fd00:77::1; search corp.example example.org" "$(text_dns)"
# A name through the tunnel: "www" plus the search domain, asked of
# 198.19.77.1 behind the tunnel, in rove's mount namespace.
got=$(nsenter -t "$LAP_PID" -m -n getent ahostsv4 www 2>/dev/null | awk 'NR == 1 { print $1 }')
expect_eq "www (search corp.example) resolved through the tunnel" 198.19.10.2 "$got"
check "the DNS server got the query from the laptop's tunnel address" \
	grep -q "^$LAP_TUN4 www.corp.example 1\$" "$WORK/dns-queries.log"
check "the host's /etc/resolv.conf is untouched" host_resolv_untouched

stop_lap
expect_eq "resolvconf -d on exit" "uid=0 -d $RC_NAME -f | " "$(call 2)"
expect_eq "the private resolv.conf after exit" "$ORIG_RESOLV" "$(cat "$RESOLV")"$'\n'
check "no StateDir note after a clean exit" note_absent
check "the helper exited with rove" pid_gone "${HELPER:-0}"
expect_eq "resolvconf calls after a clean exit" 2 "$(calls)"

# 2. rove killed: the helper notices and restores.
start_lap "$WORK/bin:/usr/bin:/bin"
wait_for 5 "resolvconf -a" ncalls_is 3 || true
expect_eq "resolvconf -a again" "uid=0 -a $RC_NAME | $WANT_INPUT" "$(call 3)"
HELPER=$(helper_pid) || fail "no DNS helper under rove"
kill -KILL "$LAP_PID"
forget_pid "$LAP_PID"
wait "$LAP_PID" 2>/dev/null
wait_for 10 "the helper to restore" ncalls_is 4 || true
expect_eq "resolvconf -d by the helper after SIGKILL" "uid=0 -d $RC_NAME -f | " "$(call 4)"
expect_eq "the private resolv.conf after SIGKILL" "$ORIG_RESOLV" "$(cat "$RESOLV")"$'\n'
wait_for 5 "the helper to exit" pid_gone "${HELPER:-0}" || fail "the helper outlived rove"
check "no StateDir note after the helper restored" note_absent

# 3. Both killed: the note in StateDir is what the next start undoes.
start_lap "$WORK/bin:/usr/bin:/bin"
wait_for 5 "resolvconf -a" ncalls_is 5 || true
HELPER=$(helper_pid) || fail "no DNS helper under rove"
kill -KILL "${HELPER:-0}" "$LAP_PID"
forget_pid "$LAP_PID"
wait "$LAP_PID" 2>/dev/null
expect_eq "resolvconf calls after both were killed" 5 "$(calls)"
expect_eq "the note left behind" "resolvconf $RC_NAME" "$(cat "$STATE/dns" 2>/dev/null)"
expect_eq "the private resolv.conf still has the tunnel's lines" "$WANT_RESOLV" "$(cat "$RESOLV")"
start_lap "$WORK/bin:/usr/bin:/bin"
wait_for 5 "resolvconf -d and -a" ncalls_is 7 || true
expect_eq "the next start undoes it first" "uid=0 -d $RC_NAME -f | " "$(call 6)"
expect_eq "then applies again" "uid=0 -a $RC_NAME | $WANT_INPUT" "$(call 7)"
check "and says so" grep -q "DNS: undoing what an earlier run left (resolvconf, $RC_NAME)" "$WORK/laptop-$RUN.log"
stop_lap
expect_eq "resolvconf -d on exit" "uid=0 -d $RC_NAME -f | " "$(call 8)"
expect_eq "the private resolv.conf at the end" "$ORIG_RESOLV" "$(cat "$RESOLV")"$'\n'

# 3b. Forged notes: one naming another device (root's file, as the
# helper writes it), one with the tunnel's own name but written by nobody
# (rove's User: any process running as nobody could). The next start acts
# on neither: it says so, and only applies.
forged() {
	local n0
	printf '%s\n' "$1" >"$STATE/dns"
	chown "$2" "$STATE/dns"
	n0=$(calls)
	start_lap "$WORK/bin:/usr/bin:/bin"
	wait_for 5 "resolvconf -a" ncalls_is $((n0 + 1)) || true
	expect_eq "$3: the next start only applies" \
		"uid=0 -a $RC_NAME | $WANT_INPUT" "$(call $((n0 + 1)))"
	check "$3: and says it ignores the note" grep -q "DNS: .*ignor" "$WORK/laptop-$RUN.log"
	stop_lap
	expect_eq "$3: then resolvconf -d on exit" "uid=0 -d $RC_NAME -f | " \
		"$(call $((n0 + 2)))"
}
forged "resolvconf eth0" root "a note naming eth0"
forged "resolvconf $RC_NAME" nobody "a note written by nobody"

# 4. DNS = no.
cp "$C/rove.conf" "$WORK/rove-dns-yes.conf"
printf 'DNS = no\n' >>"$C/rove.conf"
start_lap "$WORK/bin:/usr/bin:/bin"
expect_eq "dns.state with DNS = no" off "$(lap_dns state)"
no_children() { [ -z "$(cat "/proc/$LAP_PID/task/"*/children 2>/dev/null | tr -d ' ')" ]; }
check "no DNS helper with DNS = no" no_children
check "laptop -> server with DNS = no" ping_ok "$NS_LAP" -c 3 -i 0.05 "$SRV_TUN4"
stop_lap
expect_eq "resolvconf calls with DNS = no" 12 "$(calls)"
expect_eq "the private resolv.conf with DNS = no" "$ORIG_RESOLV" "$(cat "$RESOLV")"$'\n'
cp "$WORK/rove-dns-yes.conf" "$C/rove.conf"

# 5. systemd-resolved, on a private bus (resolvconf stays in PATH: it
# must not be used while resolved runs).
BUS=unix:path=$WORK/bus.sock
cat >"$WORK/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <listen>$BUS</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
EOF
bg dbus "$NS_LAP" dbus-daemon --nofork --nopidfile --config-file="$WORK/bus.conf"
wait_for 10 "the private bus" test -S "$WORK/bus.sock" || die "dbus-daemon does not start"
FAKE_LOG=$WORK/resolved.calls
: >"$FAKE_LOG"
bg fake-resolved "$NS_LAP" "$BUILD/tests/fake-resolved" "$BUS" "$FAKE_LOG" 200
FAKE_PID=$BG_PID
wait_for 10 "fake-resolved" grep -q ready "$WORK/fake-resolved.log" || die "fake-resolved does not start"
fake_calls_is() { [ "$(wc -l <"$FAKE_LOG")" -eq "$1" ]; }

start_lap "$WORK/bin:/usr/bin:/bin" "$BUS"
IFX=$(ip -n "$NS_LAP" -o link show rove0 | cut -d: -f1)
wait_for 5 "SetLinkDNS and SetLinkDomains" fake_calls_is 2 || true
expect_eq "SetLinkDNS, as root, on rove0" "SetLinkDNS uid=0 $IFX 198.19.77.1 fd00:77::1" "$(sed -n 1p "$FAKE_LOG")"
expect_eq "SetLinkDomains, search (not routing) domains" \
	"SetLinkDomains uid=0 $IFX corp.example:0 example.org:0" "$(sed -n 2p "$FAKE_LOG")"
expect_eq "dns.backend" resolved "$(lap_dns backend)"
expect_eq "StateDir note" "resolved rove0" "$(cat "$STATE/dns" 2>/dev/null)"
expect_eq "resolvconf not called while resolved runs" 12 "$(calls)"
stop_lap
expect_eq "RevertLink on exit" "RevertLink uid=0 $IFX" "$(sed -n 3p "$FAKE_LOG")"
check "no StateDir note after exit" note_absent

start_lap "$WORK/bin:/usr/bin:/bin" "$BUS"
IFX=$(ip -n "$NS_LAP" -o link show rove0 | cut -d: -f1)
wait_for 5 "SetLinkDNS and SetLinkDomains" fake_calls_is 5 || true
kill -KILL "$LAP_PID"
forget_pid "$LAP_PID"
wait "$LAP_PID" 2>/dev/null
wait_for 10 "the helper to revert the link" fake_calls_is 6 || true
# The TUN device may be gone by then: resolved forgets such a link itself.
case $(sed -n 6p "$FAKE_LOG") in
"RevertLink uid=0 $IFX") ok "RevertLink by the helper after SIGKILL" ;;
*) fail "after SIGKILL: expected 'RevertLink uid=0 $IFX', got '$(sed -n 6p "$FAKE_LOG")'" ;;
esac
check "no StateDir note after the helper reverted" note_absent

# A resolved that refuses (polkit's no): the tunnel works without DNS.
stop_pid "$FAKE_PID"
forget_pid "$FAKE_PID"
bg fake-resolved-refusing "$NS_LAP" "$BUILD/tests/fake-resolved" "$BUS" "$FAKE_LOG" 100 SetLinkDNS
FAKE_PID=$BG_PID
wait_for 10 "fake-resolved" grep -q ready "$WORK/fake-resolved-refusing.log" || die "fake-resolved does not start"
start_lap "$WORK/bin:/usr/bin:/bin" "$BUS"
IFX=$(ip -n "$NS_LAP" -o link show rove0 | cut -d: -f1)
expect_eq "dns.state when resolved refuses" failed "$(lap_dns state)"
expect_eq "dns.error" "systemd-resolved: SetLinkDNS: fake-resolved: refused" "$(lap_dns error)"
check "the refusal is logged" grep -q "DNS: could not apply the server's DNS (198.19.77.1, fd00:77::1; search corp.example example.org): systemd-resolved: SetLinkDNS: fake-resolved: refused; the tunnel works without it" "$WORK/laptop-$RUN.log"
expect_eq "the half-made change is reverted" "RevertLink uid=0 $IFX" "$(sed -n 8p "$FAKE_LOG")"
check "laptop -> server after the refusal" ping_ok "$NS_LAP" -c 3 -i 0.05 "$SRV_TUN4"
check "no StateDir note when nothing was applied" note_absent
stop_lap
expect_eq "fake-resolved calls in all" 8 "$(wc -l <"$FAKE_LOG")"

# 6. Neither resolved nor resolvconf.
start_lap "$WORK/nobin"
expect_eq "dns.state without a backend" failed "$(lap_dns state)"
expect_eq "dns.error" "neither systemd-resolved (on the system bus) nor resolvconf (in PATH) is there to take them" "$(lap_dns error)"
check "laptop -> server without a backend" ping_ok "$NS_LAP" -c 3 -i 0.05 "$SRV_TUN4"
stop_lap
expect_eq "resolvconf calls in all" 12 "$(calls)"
check "the host's /etc/resolv.conf is untouched at the end" host_resolv_untouched
# The helper's reports go to the same log as rove's (SAN=1 builds).
check "no sanitizer report from rove or its helper" \
	sh -c "! grep -l 'Sanitizer\|runtime error' '$WORK'/laptop-*.log"
e2e_finish
