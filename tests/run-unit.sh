#!/usr/bin/env bash
# Runs the cmocka unit test binaries given as arguments, shows their output,
# and closes with "N passed, M failed" counting test cases: the sum of
# cmocka's "[  PASSED  ] N test(s)." and "[  FAILED  ] N test(s)" lines. A
# binary that exits non-zero without reporting a failed case (a crash, a
# sanitizer abort, a failed group setup) counts as one more failure.
#
# usage: tests/run-unit.sh BINARY...
set -u

if [ $# -eq 0 ]; then
	echo "usage: $0 BINARY..." >&2
	exit 2
fi

passed=0
failed=0
skipped=0
broken=()
out=$(mktemp)
trap 'rm -f "$out"' EXIT

for bin in "$@"; do
	echo "=== $bin"
	if [ ! -x "$bin" ]; then
		echo "$bin: not an executable"
		failed=$((failed + 1))
		broken+=("$(basename "$bin")")
		continue
	fi
	# cmocka writes its report to stdout and failures to stderr; keep both,
	# in order. Bounded: no unit test binary may run for more than 5 minutes.
	timeout -k 10 300 "$bin" >"$out" 2>&1
	rc=$?
	cat "$out"
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\..*/\1/p' "$out" | awk '{ s += $1 } END { print s + 0 }')
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s).*/\1/p' "$out" | awk '{ s += $1 } END { print s + 0 }')
	s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test(s).*/\1/p' "$out" | awk '{ s += $1 } END { print s + 0 }')
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		[ $rc -eq 124 ] && echo "$bin: timed out after 300 s"
		echo "$bin: exited with status $rc without a failed test case"
		failed=$((failed + 1))
	fi
	if [ $rc -ne 0 ] || [ "$f" -ne 0 ]; then
		broken+=("$(basename "$bin")")
	fi
done

echo
[ ${#broken[@]} -eq 0 ] || echo "failing binaries: ${broken[*]}"
if [ $skipped -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ $failed -eq 0 ]
