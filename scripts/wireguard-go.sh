#!/usr/bin/env bash
# Fetches the userspace WireGuard the benchmarks compare rove against:
# Debian trixie's wireguard-go binary package, whose Go runtime and
# wireguard-go release use TUN TSO/GRO and UDP GSO/GRO. Bookworm's own
# package predates those offloads, so it would understate the bar.
#
# Usage: scripts/wireguard-go.sh [--version]
#   Prints the path of the wireguard-go binary on stdout; with --version,
#   the Debian version of the package it came from instead (the binary's
#   own --version names an older release: upstream left it unchanged).
#
# The package is downloaded with `apt-get download` through a private
# source list (the host's apt configuration is neither read for sources nor
# changed), unpacked with `dpkg-deb -x` and kept under
# CACHE_ROOT/wireguard-go-DEBIAN_VERSION (scripts/lib-apt.sh: cache_root),
# once per machine. A later run finds it there and needs no network.
set -euo pipefail
# shellcheck source=scripts/lib-apt.sh
. "$(dirname "$0")/lib-apt.sh"

# The release the benchmark figures were taken with. Any Debian revision
# of it is accepted (binary rebuilds such as +b9 change the suffix only);
# once trixie no longer serves it, the version trixie serves is taken and
# the benchmark's label shows which.
WG_GO_UPSTREAM=0.0.20231211
SUITE=trixie

log() { printf 'wireguard-go.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# cached ROOT: the newest complete unpacked copy of the pinned release.
cached() {
	local d best=
	for d in "$1"/wireguard-go-"$WG_GO_UPSTREAM"-*; do
		if [ ! -f "$d/.complete" ] || [ ! -x "$d/usr/bin/wireguard-go" ]; then
			continue
		fi
		if [ -z "$best" ] ||
			dpkg --compare-versions "${d##*/wireguard-go-}" gt "${best##*/wireguard-go-}"; then
			best=$d
		fi
	done
	[ -n "$best" ] && printf '%s\n' "$best"
}

# fetch ROOT: download and unpack the package; prints the install prefix.
fetch() {
	local root=$1 work apt ver versions deb prefix
	mkdir -p "$root"
	work=$(mktemp -d "$root/wg-fetch.XXXXXX")
	# shellcheck disable=SC2064 # the directory is fixed now
	trap "rm -rf '$work'" EXIT
	apt=$work/apt
	private_apt_dirs "$apt"
	# Binary packages only, and only amd64: nothing else is needed, and
	# the lists stay small.
	printf 'deb [arch=amd64] http://deb.debian.org/debian %s main\n' "$SUITE" \
		>"$apt/sources.list"
	# An empty dpkg status, so that a wireguard-go installed on the host
	# from bookworm is not mistaken for one the mirror serves.
	: >"$apt/status"
	log "reading $SUITE's package lists"
	private_apt "$apt" -o Dir::State::status="$apt/status" update -qq >/dev/null ||
		die "apt-get update with the private source list failed"
	versions=$(private_apt_cache "$apt" -o Dir::State::status="$apt/status" \
		madison wireguard-go | awk -F' *[|] *' '{ print $2 }')
	[ -n "$versions" ] || die "$SUITE serves no wireguard-go"
	ver=$(printf '%s\n' "$versions" | while read -r v; do
		[ "${v%-*}" = "$WG_GO_UPSTREAM" ] && printf '%s\n' "$v"
	done | sort -V | tail -n1)
	if [ -z "$ver" ]; then
		ver=$(printf '%s\n' "$versions" | sort -V | tail -n1)
		log "$SUITE no longer serves wireguard-go $WG_GO_UPSTREAM; taking $ver"
	fi
	log "downloading wireguard-go $ver from $SUITE"
	(cd "$work" && private_apt "$apt" -o Dir::State::status="$apt/status" \
		download -qq "wireguard-go=$ver" >/dev/null) ||
		die "apt-get download wireguard-go=$ver failed"
	deb=$(find "$work" -maxdepth 1 -name 'wireguard-go_*.deb' | head -n1)
	[ -n "$deb" ] || die "no .deb after apt-get download"
	prefix=$root/wireguard-go-$ver
	rm -rf "$prefix.tmp"
	dpkg-deb -x "$deb" "$prefix.tmp"
	[ -x "$prefix.tmp/usr/bin/wireguard-go" ] || die "the package holds no usr/bin/wireguard-go"
	# What went in, for whoever reads the cache later: apt checked the
	# .deb against the signed index; its hash is kept beside it.
	printf 'wireguard-go %s %s %s\n' "$ver" "$(sha256sum <"$deb" | cut -d' ' -f1)" \
		"$(basename "$deb")" >"$prefix.tmp/SOURCES"
	touch "$prefix.tmp/.complete"
	rm -rf "$prefix"
	mv "$prefix.tmp" "$prefix"
	printf '%s\n' "$prefix"
}

main() {
	local root prefix
	root=$(cache_root)
	prefix=$(cached "$root" || true)
	if [ -z "$prefix" ]; then
		prefix=$(fetch "$root")
	fi
	if [ "${1:-}" = --version ]; then
		awk '$1 == "wireguard-go" { print $2 }' "$prefix/SOURCES"
	else
		printf '%s\n' "$prefix/usr/bin/wireguard-go"
	fi
}

main "$@"
