#!/bin/sh
# Config checks: every example in configs/ must pass `-n`, and every
# tests/configs/bad-*.conf must fail with exactly the lines of its .err.
#
# usage: tests/check-configs.sh BUILD_DIR
#
# A bad-*.conf names its program on its first line ("# program: roved" or
# "# program: rove"). Its .err holds the expected stderr, with FILE standing
# for the path the file is given as.
set -u

if [ $# -ne 1 ]; then
	echo "usage: $0 BUILD_DIR" >&2
	exit 2
fi
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd) || exit 2
for prog in roved rove; do
	if [ ! -x "$build/$prog" ]; then
		echo "$0: $build/$prog is missing; run make first" >&2
		exit 2
	fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# Git does not keep file modes and the programs refuse private keys that
# others can read, so the examples are checked from a private copy.
cp -R "$top/configs" "$tmp/configs"
chmod 600 "$tmp"/configs/keys/*.key

passed=0
failed=0

pass() {
	passed=$((passed + 1))
	echo "ok   $1"
}

fail() {
	failed=$((failed + 1))
	echo "FAIL $1"
}

# run NAME PROGRAM CONFIG: the command line of `PROGRAM -n -c CONFIG`.
run() {
	case $2 in
	roved) "$build/roved" -n -c "$3" ;;
	rove) "$build/rove" up -n -c "$3" ;;
	esac
}

for conf in roved.conf rove.conf rove2.conf; do
	case $conf in
	roved.conf) prog=roved ;;
	*) prog=rove ;;
	esac
	if run "$conf" "$prog" "$tmp/configs/$conf" >"$tmp/out" 2>"$tmp/err"
	then
		pass "configs/$conf"
	else
		fail "configs/$conf: '$prog -n' exited $?"
		sed 's/^/    /' "$tmp/err"
	fi
done

# judge NAME RC: the program refused (exit 1-125, not a crash) with
# exactly the messages of $tmp/want on standard error ($tmp/err).
judge() {
	if [ "$2" -eq 0 ]; then
		fail "$1: '-n' accepted it"
	elif [ "$2" -ge 126 ]; then
		fail "$1: '-n' died (exit $2)"
		sed 's/^/    /' "$tmp/err"
	elif ! cmp -s "$tmp/want" "$tmp/err"; then
		fail "$1: unexpected messages"
		diff -u "$tmp/want" "$tmp/err" | sed 's/^/    /'
	else
		pass "$1"
	fi
}

# start_check NAME PROGRAM CONFIG WANT [RUNNER...]: `PROGRAM -n -c CONFIG`
# (PROGRAM: rove, roved or the path of a roved)
# (run by RUNNER, e.g. setpriv) fails with exactly the line WANT, FILE
# standing for CONFIG: what start would refuse, -n refuses.
start_check() {
	local name=$1 prog=$2 conf=$3 want=$4 rc
	shift 4
	case $prog in
	rove) "$@" "$build/rove" up -n -c "$conf" >"$tmp/out" 2>"$tmp/err" ;;
	roved) "$@" "$build/roved" -n -c "$conf" >"$tmp/out" 2>"$tmp/err" ;;
	*) "$@" "$prog" -n -c "$conf" >"$tmp/out" 2>"$tmp/err" ;;
	esac
	rc=$?
	printf '%s\n' "$want" | awk -v f="$conf" '{ gsub(/FILE/, f); print }' >"$tmp/want"
	judge "-n, $name" "$rc"
}

c=$tmp/configs
cp "$c/roved.conf" "$c/nokey.conf"
sed -i 's|^PrivateKeyFile = .*|PrivateKeyFile = keys/missing.key|' "$c/nokey.conf"
start_check "a missing key file" roved "$c/nokey.conf" \
	"$c/keys/missing.key: No such file or directory"
cp "$c/keys/laptop.key" "$c/keys/shared.key"
chmod 644 "$c/keys/shared.key"
cp "$c/rove.conf" "$c/sharedkey.conf"
sed -i 's|^PrivateKeyFile = .*|PrivateKeyFile = keys/shared.key|' "$c/sharedkey.conf"
start_check "a key others can read" rove "$c/sharedkey.conf" \
	"$c/keys/shared.key: private key is accessible by group or others (mode 0644); chmod 600 it"
cp "$c/roved.conf" "$c/open.conf"
chmod 666 "$c/open.conf"
start_check "a config anyone can write" roved "$c/open.conf" \
	"FILE: writable by everyone (mode 0666); chmod o-w it"
# User = nobody set while running as another user who is not root.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	# A copy of roved that user can run wherever the build lies.
	cp "$build/roved" "$tmp/roved"
	chmod 755 "$tmp" "$c" "$tmp/roved"
	start_check "User while not root" "$tmp/roved" "$c/roved.conf" \
		"FILE:$(grep -n '^User' "$c/roved.conf" | cut -d: -f1): User: running as uid 65533, not root: cannot switch to user 'nobody' (uid $(id -u nobody))" \
		setpriv --reuid=65533 --regid=65533 --clear-groups
	chmod 700 "$tmp"
fi

cd "$top" || exit 2
for conf in tests/configs/bad-*.conf; do
	want=${conf%.conf}.err
	prog=$(sed -n '1s/^# program: *\([a-z]*\) *$/\1/p' "$conf")
	case $prog in
	roved | rove) ;;
	*)
		fail "$conf: first line must be '# program: roved' or '# program: rove'"
		continue
		;;
	esac
	if [ ! -f "$want" ]; then
		fail "$conf: $want is missing"
		continue
	fi
	run "$conf" "$prog" "$conf" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	# FILE in the .err stands for the path given to -c.
	awk -v f="$conf" '{ gsub(/FILE/, f); print }' "$want" >"$tmp/want"
	judge "$conf" "$rc"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
