#!/usr/bin/env bash
# Runs every end-to-end test (tests/e2e/test-*.sh) against one build and
# prints PASS/FAIL per test and a closing "N passed, M failed" line.
#
# usage: tests/e2e/run.sh BUILD_DIR [TEST...]
#   TEST: names like "ping" or "test-ping.sh"; default all.
# Each test's output goes to BUILD_DIR/e2e/NAME.log and is printed when the
# test fails. Needs root: the tests make network namespaces and TUN devices.
# E2E_JOBS (default: the cores + 1): how many tests marked "# e2e: light" run at once;
# 1 runs everything one by one.
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

# Tests that spend their time waiting (timers, outages, reloads) and move
# little data say so with a line "# e2e: light"; they run E2E_JOBS at a
# time, after the others have run one by one. Each test has namespaces,
# a work directory and processes of its own.
# One more than the cores: four at once on two cores under the
# sanitizers starved a test's pings (test-reload lost one of 150).
jobs=${E2E_JOBS:-$(($(nproc) + 1))}
heavy=()
light=()
for t in "${tests[@]}"; do
	if [ "$jobs" -gt 1 ] && grep -q '^# e2e: light$' "$t"; then
		light+=("$t")
	else
		heavy+=("$t")
	fi
done

# run_test TEST: run it (bounded: no test takes more than 5 minutes); its
# exit status and seconds go to LOGS/NAME.rc and LOGS/NAME.secs.
run_test() {
	local name start rc
	name=$(basename "$1" .sh)
	start=$(date +%s)
	timeout -k 10 300 bash "$1" "$build" >"$logs/$name.log" 2>&1
	rc=$?
	[ $rc -eq 124 ] && echo "$name: timed out after 300 s" >>"$logs/$name.log"
	echo $(($(date +%s) - start)) >"$logs/$name.secs"
	echo $rc >"$logs/$name.rc"
}

report() {
	local name rc secs
	name=$(basename "$1" .sh)
	rc=$(cat "$logs/$name.rc")
	secs=$(cat "$logs/$name.secs")
	rm -f "$logs/$name.rc" "$logs/$name.secs"
	if [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
		printf 'PASS %-20s (%ds)\n' "$name" "$secs"
	else
		failed=$((failed + 1))
		failures+=("$name")
		printf 'FAIL %-20s (%ds, exit %d)\n' "$name" "$secs" "$rc"
		sed 's/^/    /' "$logs/$name.log"
		# Again at the end: a long log may be cut in the middle where
		# it is shown.
		echo "    $name: failed checks:"
		grep -E '(^|] )FAIL: |timed out after' "$logs/$name.log" | sed 's/^/      /'
	fi
}

for t in "${heavy[@]}"; do
	run_test "$t"
	report "$t"
done

declare -A running=()
for t in "${light[@]}"; do
	while [ ${#running[@]} -ge "$jobs" ]; do
		wait -n
		for pid in "${!running[@]}"; do
			kill -0 "$pid" 2>/dev/null && continue
			wait "$pid"
			report "${running[$pid]}"
			unset "running[$pid]"
		done
	done
	run_test "$t" &
	running[$!]=$t
done
for pid in "${!running[@]}"; do
	wait "$pid"
	report "${running[$pid]}"
done

[ $failed -eq 0 ] || echo "failed: ${failures[*]} (logs in $logs)"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
