#!/usr/bin/env bash
# Builds the Debian package (debian/) from the tracked files of this tree,
# in a scratch copy so the working tree keeps its builds, with the same
# dependency cache (.deps), then checks it with lintian. The package and
# lintian's report end up in build/deb/.
#
# usage: scripts/deb.sh       (make deb; needs dpkg-dev, debhelper, lintian)
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
out=$top/build/deb

log() { printf 'deb: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

for p in dpkg-buildpackage dh lintian; do
	command -v "$p" >/dev/null || die "$p is missing (scripts/deps.sh installs it)"
done
[ -e .deps/.complete ] || make deps >/dev/null
deps=$(readlink -f .deps)

tmp=$(mktemp -d /tmp/rove-deb.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/rove"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$tmp/rove"
ln -s "$deps" "$tmp/rove/.deps"

log "building in $tmp/rove"
(cd "$tmp/rove" && dpkg-buildpackage -us -uc -b) >"$tmp/build.log" 2>&1 || {
	tail -n 40 "$tmp/build.log" >&2
	die "dpkg-buildpackage failed"
}
mkdir -p "$out"
rm -f "$out"/*.deb
cp "$tmp"/*.deb "$tmp"/*.buildinfo "$tmp"/*.changes "$out/"
deb=$(ls "$out"/rove_*.deb)
log "built $deb"

# Errors fail the build; warnings and the rest are in the report.
rc=0
lintian --fail-on error "$deb" >"$out/lintian.txt" 2>&1 || rc=$?
cat "$out/lintian.txt" >&2
errors=$(grep -c '^E: ' "$out/lintian.txt" || true)
warnings=$(grep -c '^W: ' "$out/lintian.txt" || true)
log "lintian: $errors error(s), $warnings warning(s) (build/deb/lintian.txt)"
[ "$rc" -eq 0 ] || die "lintian found errors"
