#!/usr/bin/env bash
# The control socket's directory belongs to the user running the program
# and nobody else may write to it. rove, run as an unprivileged user with
# no ControlSocket and no XDG_RUNTIME_DIR, falls back to /tmp/rove-UID:
# planted there by someone else (even mode 0777), writable by others or
# the group, or a symbolic link to a good directory, it is refused with a
# message naming the directory and the reason, and nothing is created in
# it. Missing, it is created 0700 and owned by that user, and rove status
# reaches the socket in it. roved (root, no User) refuses a ControlSocket
# in nobody's directory and leaves no TUN device; with User = nobody the
# same directory is accepted.
#
#   $NS_LAP (lo only): rove, Tun = none, as uid $FAKE_UID
#   $NS_SRV (lo, with $SRV_OUTER): roved, as root
# e2e: light
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
ns_add "$NS_LAP"
ns_add "$NS_SRV"
# roved's Listen address, so that it gets as far as its control socket.
ip -n "$NS_SRV" addr add "$SRV_OUTER/32" dev lo
command -v setpriv >/dev/null || die "setpriv is not installed (util-linux)"

# A uid no account has and whose /tmp/rove-UID nobody uses, so that this
# test never touches a real user's directory.
FAKE_UID=
for ((i = 0; i < 100; i++)); do
	u=$((61000 + (RANDOM % 4000)))
	if ! getent passwd "$u" >/dev/null && [ ! -e "/tmp/rove-$u" ] &&
		[ ! -L "/tmp/rove-$u" ]; then
		FAKE_UID=$u
		break
	fi
done
[ -n "$FAKE_UID" ] || die "no free uid for the test"
D=/tmp/rove-$FAKE_UID
trap 'rc=$?; rm -rf -- "$D"; (exit $rc); e2e_cleanup' EXIT

# The unprivileged rove's files, all its own: forward-only, no
# ControlSocket (so the fallback applies), no User.
U=$WORK/u
mkdir -p "$U/keys" "$U/real"
cp "$WORK/configs/keys/laptop.key" "$U/keys/laptop.key"
sed -e 's/^Tun = .*/Tun = none/' -e '/^Routes = /d' -e '/^ControlSocket = /d' \
	-e '/^User = /d' -e 's|^StateDir = .*|StateDir = state|' \
	"$WORK/configs/rove.conf" >"$U/rove.conf"
chown -R "$FAKE_UID:$FAKE_UID" "$U"
chmod 700 "$U" "$U/real"
chmod 600 "$U/keys/laptop.key"

# as_user COMMAND...: COMMAND in $NS_LAP as $FAKE_UID, no groups, no
# capabilities, no XDG_RUNTIME_DIR.
as_user() {
	nsx "$NS_LAP" setpriv --reuid="$FAKE_UID" --regid="$FAKE_UID" --clear-groups \
		--inh-caps=-all --bounding-set=-all env -u XDG_RUNTIME_DIR "$@"
}

# refused WHAT WHY: rove up exits 1 at once, saying that $D WHY, and
# creates nothing in the directory (nor where a link points).
refused() {
	local rc=0 err
	as_user timeout 5 "$BUILD/rove" up -f -c "$U/rove.conf" >"$WORK/out" 2>"$WORK/err" || rc=$?
	err=$(cat "$WORK/err")
	expect_eq "rove with $1: exit status" 1 "$rc"
	if grep -qF "control socket directory $D $2" "$WORK/err"; then
		ok "rove with $1 says: control socket directory $D $2"
	else
		fail "rove with $1: no 'control socket directory $D $2' in: $err"
	fi
	expect_eq "rove with $1: files made in $D" "" "$(ls -A "$D/" 2>/dev/null)"
	expect_eq "rove with $1: files made in $U/real" "" "$(ls -A "$U/real")"
}

# 1. Planted by another user (root here), open to all: the issue's case.
mkdir -m 0777 "$D"
chmod 0777 "$D"
refused "$D root's, mode 0777" "belongs to uid 0, not to this user (uid $FAKE_UID)"
# 2. The user's own, but others or the group may write to it.
chown "$FAKE_UID:$FAKE_UID" "$D"
refused "$D writable by others" "is writable by others (mode 0777)"
chmod 1777 "$D"
refused "$D sticky and writable by others" "is writable by others (mode 1777)"
chmod 0770 "$D"
refused "$D writable by its group" "is writable by its group (mode 0770)"
# 3. A link to the user's own good directory: never followed.
rmdir "$D"
ln -s "$U/real" "$D"
refused "$D a symbolic link" "is a symbolic link"
rm -f "$D"

# 4. Missing: made 0700 for the user, and rove status finds the socket.
bg laptop "$NS_LAP" setpriv --reuid="$FAKE_UID" --regid="$FAKE_UID" --clear-groups \
	--inh-caps=-all --bounding-set=-all env -u XDG_RUNTIME_DIR \
	"$BUILD/rove" up -f -c "$U/rove.conf" ${ROVE_VERBOSE:+-v}
LAP_PID=$BG_PID
sock_up() { [ -S "$D/rove.sock" ]; }
wait_for 10 "rove's socket in $D" sock_up || fail "rove made no socket in $D"
expect_eq "$D owner and mode" "$FAKE_UID:$FAKE_UID 700 directory" \
	"$(stat -c '%u:%g %a %F' "$D")"
role=$(as_user "$BUILD/rove" status --json 2>&1 | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["role"])' 2>&1)
expect_eq "rove status (fallback socket) as the user: role" client "$role"
forget_pid "$LAP_PID"
stop_pid "$LAP_PID"
expect_eq "rove's exit status on SIGTERM" 0 "$?"
expect_eq "files left in $D after exit" "" "$(ls -A "$D/")"

# 5. roved as root without User: nobody's directory is refused, and the
# TUN device it made first is gone again.
E=$WORK/nobodys
mkdir -m 0755 "$E"
chown nobody "$E"
NOBODY_UID=$(id -u nobody)
sed -e '/^User = /d' -e "s|^ControlSocket = .*|ControlSocket = $E/roved.sock|" \
	"$WORK/configs/roved.conf" >"$WORK/configs/roved-root.conf"
rc=0
nsx "$NS_SRV" timeout 10 "$BUILD/roved" -f -c "$WORK/configs/roved-root.conf" \
	>"$WORK/out" 2>"$WORK/err" || rc=$?
expect_eq "roved with its socket in nobody's directory: exit status" 1 "$rc"
want="control socket directory $E belongs to uid $NOBODY_UID, not to this user (uid 0)"
if grep -qF "$want" "$WORK/err"; then
	ok "roved says: $want"
else
	fail "roved: no '$want' in: $(cat "$WORK/err")"
fi
expect_eq "files made in $E" "" "$(ls -A "$E")"
expect_eq "TUN devices left in $NS_SRV" "" "$(ip -n "$NS_SRV" -o link show type tun)"

# 6. The same directory with User = nobody: roved becomes nobody, so the
# directory is its own, and it serves status there.
# (A StateDir of its own: the one above, and the directory holding it,
# are root's now.)
sed -e "s|^ControlSocket = .*|ControlSocket = $E/roved.sock|" \
	-e "s|^StateDir = .*|StateDir = $WORK/state-nobody|" \
	"$WORK/configs/roved.conf" >"$WORK/configs/roved-nobody.conf"
start_roved "$WORK/configs/roved-nobody.conf"
expect_eq "roved (User = nobody) status: role" server "$(status "$NS_SRV" "$E/roved.sock" | jget role)"
e2e_finish
