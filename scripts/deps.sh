#!/usr/bin/env bash
# Installs what rove needs to build and test on Debian 12, and builds the two
# libraries Debian does not ship in a usable form (wolfSSL with its QUIC API,
# ngtcp2 with ngtcp2_crypto_wolfssl) from Debian's own source packages.
#
# Usage: scripts/deps.sh [--packages-only] LINK
#   LINK becomes a symlink to the cached install prefix (include/, lib/).
# A second run with everything in place touches nothing and needs no network.
set -euo pipefail

WOLFSSL_UPSTREAM=5.5.4
NGTCP2_UPSTREAM=0.12.1
WOLFSSL_CONFIGURE=(--enable-quic --enable-earlydata --enable-session-ticket
	--enable-tls13 --enable-aesgcm --enable-chacha --enable-poly1305
	--enable-curve25519 --enable-ed25519 --enable-certgen --enable-keygen
	--enable-aesni --enable-intelasm
	--enable-sp --enable-sp-asm --enable-harden --enable-hkdf
	--enable-opensslextra --enable-alpn --enable-sni --enable-static
	--disable-shared --disable-examples --disable-crypttests)

WOLFSSL_CFLAGS="-O2 -fPIC -DWOLFSSL_ALWAYS_VERIFY_CB"

PACKAGES=(build-essential pkg-config autoconf automake libtool cmake dpkg-dev
	libevent-dev libnl-3-dev libnl-route-3-dev libcap-ng-dev libcmocka-dev
	iproute2 nftables conntrack iperf3 iputils-ping procps psmisc curl
	python3 openssl)

log() { printf 'deps: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_packages() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
			grep -q '^install ok installed$' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing: ${missing[*]}"
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends "${missing[@]}" >/dev/null
}

# The configuration that decides the build output; part of the cache key so
# a change of flags rebuilds instead of reusing a stale library.
config_hash() {
	printf '%s\n' "$WOLFSSL_UPSTREAM" "$NGTCP2_UPSTREAM" "$WOLFSSL_CFLAGS" "${WOLFSSL_CONFIGURE[@]}" |
		sha256sum | cut -c1-12
}

cache_root() {
	if [ -n "${ROVE_DEPS_CACHE:-}" ]; then
		printf '%s\n' "$ROVE_DEPS_CACHE"
	elif [ "$(id -u)" -eq 0 ]; then
		printf '/var/cache/rove-deps\n'
	else
		printf '%s/.cache/rove-deps\n' "${XDG_CACHE_HOME:-$HOME}"
	fi
}

# apt-get with a private source list and lists directory, so the host's apt
# configuration and state are never read for sources nor written.
private_apt() {
	local dir=$1; shift
	apt-get -o Dir::Etc::SourceList="$dir/sources.list" \
		-o Dir::Etc::SourceParts="$dir/sources.list.d" \
		-o Dir::State::Lists="$dir/lists" \
		-o Dir::Cache="$dir/cache" \
		-o APT::Sandbox::User=root \
		-o Debug::NoLocking=1 "$@"
}

fetch_sources() {
	local work=$1 apt="$1/apt"
	mkdir -p "$apt/sources.list.d" "$apt/lists/partial" "$apt/cache/archives/partial"
	cat >"$apt/sources.list" <<-SRC
	deb-src http://deb.debian.org/debian bookworm main
	deb-src http://deb.debian.org/debian-security bookworm-security main
	SRC
	private_apt "$apt" update -qq >/dev/null
	(cd "$work" && private_apt "$apt" source -qq wolfssl ngtcp2 >/dev/null)
}

build_wolfssl() {
	local src=$1 prefix=$2
	log "building wolfSSL in $src"
	(cd "$src" && autoreconf -fi >/dev/null 2>&1 &&
		./configure --prefix="$prefix" "${WOLFSSL_CONFIGURE[@]}" \
			CFLAGS="$WOLFSSL_CFLAGS" >/dev/null &&
		make -j"$(nproc)" >/dev/null && make install >/dev/null)
}

build_ngtcp2() {
	local src=$1 prefix=$2
	log "building ngtcp2 in $src"
	cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_PREFIX_PATH="$prefix" \
		-DCMAKE_POSITION_INDEPENDENT_CODE=ON \
		-DENABLE_WOLFSSL=ON -DENABLE_OPENSSL=OFF -DENABLE_GNUTLS=OFF \
		-DENABLE_BORINGSSL=OFF -DENABLE_PICOTLS=OFF \
		-DENABLE_SHARED_LIB=OFF -DENABLE_STATIC_LIB=ON \
		-DWOLFSSL_INCLUDE_DIR="$prefix/include" \
		-DWOLFSSL_LIBRARY="$prefix/lib/libwolfssl.a" >/dev/null
	cmake --build "$src/build" -j"$(nproc)" >/dev/null
	cmake --install "$src/build" >/dev/null
}

main() {
	local packages_only=0
	if [ "${1:-}" = --packages-only ]; then packages_only=1; shift; fi
	install_packages "${PACKAGES[@]}"
	[ $packages_only -eq 1 ] && return 0

	local link=${1:?usage: deps.sh [--packages-only] LINK}
	local root key prefix
	root=$(cache_root)
	key="wolfssl-${WOLFSSL_UPSTREAM}_ngtcp2-${NGTCP2_UPSTREAM}_$(config_hash)"
	prefix="$root/$key"
	if [ ! -f "$prefix/.complete" ]; then
		mkdir -p "$root"
		BUILD_DIR=$(mktemp -d "$root/build.XXXXXX")
		trap 'rm -rf "$BUILD_DIR"' EXIT
		local work=$BUILD_DIR
		fetch_sources "$work"
		local wsrc nsrc
		wsrc=$(find "$work" -maxdepth 1 -type d -name "wolfssl-${WOLFSSL_UPSTREAM}*" | head -n1)
		nsrc=$(find "$work" -maxdepth 1 -type d -name "ngtcp2-${NGTCP2_UPSTREAM}*" | head -n1)
		[ -n "$wsrc" ] || die "wolfssl $WOLFSSL_UPSTREAM source not found"
		[ -n "$nsrc" ] || die "ngtcp2 $NGTCP2_UPSTREAM source not found"
		rm -rf "$prefix.tmp"
		build_wolfssl "$wsrc" "$prefix.tmp"
		build_ngtcp2 "$nsrc" "$prefix.tmp"
		# Record exactly which Debian revisions went in.
		(cd "$work" && ls ./*.dsc) >"$prefix.tmp/SOURCES"
		touch "$prefix.tmp/.complete"
		rm -rf "$prefix"
		mv "$prefix.tmp" "$prefix"
		# The prefix baked into pkg-config files is the .tmp path; nothing
		# reads them, the Makefile uses the prefix directly.
	fi
	ln -sfn "$prefix" "$link"
}

main "$@"
