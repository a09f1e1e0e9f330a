#!/usr/bin/env bash
# Runs every end-to-end test (tests/e2e/test-*.sh) against one build and
# prints PASS/FAIL per test and a closing "N passed, M failed" line.
#
# usage: tests/e2e/run.sh BUILD_DIR [TEST...]
#   TEST: names like "ping" or "test-ping.sh"; default all.
# Each test's output goes to BUILD_DIR/e2e/NAME.log and is printed when the
# test fails. Needs root: the tests make network namespaces and TUN devices.
set -u

if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [TEST...]" >&2
	exit 2
fi
dir=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd) || exit 2
shift
if [ "$(id -u)" -ne 0 ]; then
	echo "$0: the end-to-end tests need root (they create network namespaces and TUN devices)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi

tests=()
if [ $# -eq 0 ]; then
	for t in "$dir"/test-*.sh; do
		[ -e "$t" ] && tests+=("$t")
	done
else
	for t in "$@"; do
		t=${t#test-}; t=${t%.sh}
		[ -e "$dir/test-$t.sh" ] || { echo "$0: no test $t" >&2; exit 2; }
		tests+=("$dir/test-$t.sh")
	done
fi

logs=$build/e2e
mkdir -p "$logs"
passed=0
failed=0
failures=()
for t in "${tests[@]}"; do
	name=$(basename "$t" .sh)
	start=$(date +%s)
	# Bounded: no test takes more than 5 minutes.
	timeout -k 10 300 bash "$t" "$build" >"$logs/$name.log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	if [ $rc -eq 0 ]; then
		passed=$((passed + 1))
		printf 'PASS %-20s (%ds)\n' "$name" "$secs"
	else
		failed=$((failed + 1))
		failures+=("$name")
		[ $rc -eq 124 ] && echo "$name: timed out after 300 s" >>"$logs/$name.log"
		printf 'FAIL %-20s (%ds, exit %d)\n' "$name" "$secs" "$rc"
		sed 's/^/    /' "$logs/$name.log"
		# Again at the end: a long log may be cut in the middle where
		# it is shown.
		echo "    $name: failed checks:"
		grep -E '(^|] )FAIL: |timed out after' "$logs/$name.log" | sed 's/^/      /'
	fi
done
[ $failed -eq 0 ] || echo "failed: ${failures[*]} (logs in $logs)"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
