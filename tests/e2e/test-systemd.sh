#!/usr/bin/env bash
# Running under systemd, without systemd as PID 1 here:
#  1. make install into a DESTDIR puts exactly the expected files there,
#     with their modes, and make uninstall takes exactly those away;
#  2. systemd-analyze verify accepts both units (their binaries in place)
#     and systemd-analyze security rates them (exposure printed; at most
#     3.0, "OK");
#  3. sd_notify, with a stand-in for systemd's socket: roved says READY=1
#     once set up, and its STATUS counts connected peers; rove says READY=1
#     once its tunnel is up; with WATCHDOG_USEC set, both keep pinging;
#  4. SIGHUP (systemctl reload) reloads the configuration: both log it,
#     count it, and keep running.
# e2e: light
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
TOP=$(cd "$(dirname "$0")/../.." && pwd)
for p in systemd-analyze make; do
	command -v $p >/dev/null || die "$p is not installed"
done

# 1. make install / uninstall.
dest=$WORK/dest
make -s -C "$TOP" install BUILD="$BUILD" DESTDIR="$dest" PREFIX=/usr \
	>"$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; die "make install failed"; }
got=$(cd "$dest" && find . -type f -printf '%m %p\n' | sort)
want="644 ./usr/lib/systemd/system/rove@.service
644 ./usr/lib/systemd/system/roved.service
644 ./usr/share/doc/rove/examples/rove.conf
644 ./usr/share/doc/rove/examples/roved.conf
644 ./usr/share/man/man5/rove.conf.5
644 ./usr/share/man/man8/rove.8
644 ./usr/share/man/man8/roved.8
755 ./usr/bin/rove
755 ./usr/sbin/roved"
expect_eq "files make install put in DESTDIR" "$want" "$got"
expect_eq "ExecStart of the installed roved.service" \
	"ExecStart=/usr/sbin/roved -f -c /etc/rove/roved.conf" \
	"$(grep '^ExecStart=' "$dest/usr/lib/systemd/system/roved.service")"
# rove@NAME keeps its socket in /run/rove/NAME, under roved's
# RuntimeDirectory: without Preserve, stopping roved would remove it.
expect_eq "roved.service keeps /run/rove when it stops" "RuntimeDirectoryPreserve=yes" \
	"$(grep '^RuntimeDirectoryPreserve=' "$dest/usr/lib/systemd/system/roved.service")"
expect_eq "rove@.service's runtime directory is its own, under /run/rove" \
	"RuntimeDirectory=rove/%i" \
	"$(grep '^RuntimeDirectory=' "$dest/usr/lib/systemd/system/rove@.service")"
make -s -C "$TOP" uninstall BUILD="$BUILD" DESTDIR="$dest" PREFIX=/usr \
	>>"$WORK/install.log" 2>&1 || die "make uninstall failed"
expect_eq "files left after make uninstall" "" "$(cd "$dest" && find . -type f)"
expect_eq "make uninstall removed its doc directory" no \
	"$([ -e "$dest/usr/share/doc/rove" ] && echo yes || echo no)"

# 2. The units, pointing at this build's binaries.
units=$WORK/units
mkdir -p "$units"
for f in "$TOP"/configs/systemd/*.in; do
	sed -e "s|@SBINDIR@|$BUILD|g" -e "s|@BINDIR@|$BUILD|g" "$f" \
		>"$units/$(basename "${f%.in}")"
done
cp "$units/rove@.service" "$units/rove@office.service"
if systemd-analyze verify --man=no "$units/roved.service" "$units/rove@office.service" \
	>"$WORK/verify.log" 2>&1; then
	ok "systemd-analyze verify accepts roved.service and rove@.service"
else
	fail "systemd-analyze verify: $(cat "$WORK/verify.log")"
fi
for u in roved.service rove@office.service; do
	score=$(systemd-analyze security --offline=true "$units/$u" 2>&1 |
		sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\) .*/\1/p')
	log "systemd-analyze security $u: exposure $score"
	if [ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }'; then
		ok "$u: exposure $score <= 3.0"
	else
		fail "$u: exposure '${score:-none}' (want <= 3.0)"
	fi
done

# 3. sd_notify.
topo_up
# notify_up NAME: a stand-in socket $WORK/NAME.notify logging to NAME.nlog.
notify_up() {
	bg "$1-notify" "$NS_SRV" /usr/bin/python3 "$(dirname "$0")/notify-listen.py" \
		"$WORK/$1.notify" "$WORK/$1.nlog" 60
	wait_for 5 "the $1 notification socket" test -S "$WORK/$1.notify" ||
		die "the notification socket does not come up"
}
has_line() { grep -q -- "$2" "$WORK/$1.nlog" 2>/dev/null; }
notify_up roved
notify_up laptop
NOTIFY_SOCKET=$WORK/roved.notify WATCHDOG_USEC=400000 start_roved
wait_for 5 "roved's READY=1" has_line roved "READY=1 | STATUS=0 of 2 peers connected" ||
	fail "roved sent no READY=1 with its status: $(cat "$WORK/roved.nlog" 2>/dev/null)"
NOTIFY_SOCKET=$WORK/laptop.notify WATCHDOG_USEC=400000 start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
wait_for 5 "roved's status with the laptop" has_line roved "^STATUS=1 of 2 peers connected" ||
	fail "roved did not report the laptop: $(cat "$WORK/roved.nlog")"
wait_for 5 "the laptop's READY=1" has_line laptop "READY=1 | STATUS=connected: " ||
	fail "rove sent no READY=1: $(cat "$WORK/laptop.nlog" 2>/dev/null)"
expect_eq "READY=1 messages from roved" 1 "$(grep -c 'READY=1' "$WORK/roved.nlog")"
expect_eq "READY=1 messages from rove" 1 "$(grep -c 'READY=1' "$WORK/laptop.nlog")"
sleep 1
for who in roved laptop; do
	n=$(grep -c '^WATCHDOG=1$' "$WORK/$who.nlog")
	if [ "$n" -ge 3 ]; then
		ok "$who pinged the watchdog $n times (every 200 ms)"
	else
		fail "$who pinged the watchdog $n times in over a second (WATCHDOG_USEC 400 ms)"
	fi
done

# 4. SIGHUP (what ExecReload sends) reloads the unchanged file: nothing
# changes, both say so and keep running.
kill -HUP "$ROVED_PID" "$LAP_PID"
for who in roved laptop; do
	if wait_for 5 "$who's reload" grep -q "reload done" "$WORK/$who.log"; then
		ok "$who reloaded its configuration on SIGHUP"
	else
		fail "$who did not log a reload on SIGHUP"
	fi
done
expect_eq "roved: no peer changed" 1 "$(grep -c "reload: no peer changed" "$WORK/roved.log")"
expect_eq "roved's reloads applied, refused" "1 0" "$(srv_get reloads.applied) $(srv_get reloads.refused)"
expect_eq "rove's reloads applied, refused" "1 0" \
	"$(sget "$NS_LAP" "$LAP_SOCK" reloads.applied) $(sget "$NS_LAP" "$LAP_SOCK" reloads.refused)"
check "laptop -> server after SIGHUP" ping_ok "$NS_LAP" -c 3 -i 0.05 "$SRV_TUN4"
stop_pid "$LAP_PID"; forget_pid "$LAP_PID"
expect_eq "roved's status once the laptop left" yes \
	"$(wait_for 5 "roved's status" has_line roved '^STATUS=0 of 2 peers connected' && echo yes || echo no)"
e2e_finish
