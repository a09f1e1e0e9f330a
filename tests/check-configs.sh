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
	if [ "$rc" -eq 0 ]; then
		fail "$conf: '$prog -n' accepted it"
	elif [ "$rc" -ge 126 ]; then
		fail "$conf: '$prog -n' died (exit $rc)"
		sed 's/^/    /' "$tmp/err"
	elif ! cmp -s "$tmp/want" "$tmp/err"; then
		fail "$conf: unexpected messages"
		diff -u "$tmp/want" "$tmp/err" | sed 's/^/    /'
	else
		pass "$conf"
	fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
