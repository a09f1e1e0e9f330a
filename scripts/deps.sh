#!/usr/bin/env bash
# Installs what rove needs to build and test on Debian 12, and builds the two
# libraries Debian does not ship in a usable form (wolfSSL with its QUIC API,
# ngtcp2 with ngtcp2_crypto_wolfssl) from Debian's own source packages.
#
# Usage: scripts/deps.sh [--packages-only] LINK
#   LINK becomes a symlink to the cached install prefix (include/, lib/).
# A second run with everything in place touches nothing and needs no network.
set -euo pipefail
# shellcheck source=scripts/lib-apt.sh
. "$(dirname "$0")/lib-apt.sh"

# Each library is pinned by upstream version and the sha256 of its orig
# tarball; any Debian revision whose .dsc lists that tarball is accepted.
# ngtcp2 comes from sid, which moves on: when 1.24.0 has left the mirror the
# newest 1.x of NGTCP2_FALLBACK that the suites still serve is used instead
# (the code is written against APIs present since 1.11).
# wolfSSL 5.9.2 (sid) brings ML-KEM and the hybrid TLS group
# X25519MLKEM768; 5.7.2 (trixie) is the fallback when 5.9.2 cannot be had,
# or the choice with ROVE_WOLFSSL=5.7.2 (make WOLFSSL=5.7.2).
WOLFSSL_PREFERRED=5.9.2
WOLFSSL_FALLBACK=5.7.2
declare -A WOLFSSL_KNOWN=(
	[5.9.2]=2f4ef3d4fd387a9b3191d36a6316d69116c46ff69bb9583b6c82b36d7b8ca114
	[5.7.2]=0f2ed82e345b833242705bbc4b08a2a2037a33f7bf9c610efae6464f6b10e305
)
WOLFSSL_UPSTREAM=${ROVE_WOLFSSL:-$WOLFSSL_PREFERRED}
[ -n "${WOLFSSL_KNOWN[$WOLFSSL_UPSTREAM]:-}" ] || {
	printf 'deps: ROVE_WOLFSSL=%s: only %s are known\n' "$WOLFSSL_UPSTREAM" \
		"${!WOLFSSL_KNOWN[*]}" >&2
	exit 1
}
WOLFSSL_SHA256=${WOLFSSL_KNOWN[$WOLFSSL_UPSTREAM]}
NGTCP2_UPSTREAM=1.24.0
NGTCP2_SHA256=7fa5ec2be0f0cbed8bc4ec89c0787dfa9d8ce678f1ed9477c52f30eb1a591207
NGTCP2_FALLBACK_MIN=1.11.0
# Known orig tarballs of fallback versions; a version not listed here is
# checked against the sha256 its .dsc states (the signed Sources index).
declare -A NGTCP2_KNOWN=(
	[1.24.0]=7fa5ec2be0f0cbed8bc4ec89c0787dfa9d8ce678f1ed9477c52f30eb1a591207
	[1.11.0]=382c15bf66b630f26021631b25b7eb1feac42c67c1d6826189d61091dfaa4d09
)
WOLFSSL_CONFIGURE=(--enable-quic --enable-earlydata --enable-session-ticket
	--enable-tls13 --enable-aesgcm --enable-chacha --enable-poly1305
	--enable-curve25519 --enable-ed25519 --enable-certgen --enable-keygen
	--enable-aesni --enable-intelasm
	--enable-sp --enable-sp-asm --enable-harden --enable-hkdf
	--enable-opensslextra --enable-alpn --enable-sni --enable-static
	--enable-singlethreaded
	--disable-shared --disable-examples --disable-crypttests)
# What a version adds: 5.9.2's ML-KEM (FIPS 203) with its PQ/T hybrid
# groups (X25519MLKEM768); both are on by default there, named here so
# that a change of default upstream cannot drop them unseen.
declare -A WOLFSSL_CONFIGURE_EXTRA=(
	[5.9.2]="--enable-mlkem --enable-pqc-hybrids"
)

# --enable-singlethreaded: every program of ours runs one thread (one
# event loop), and it lets a WOLFSSL use its context's RNG
# (wolfSSL_CTX_new_rng, tls.c) instead of seeding a DRBG of its own per
# handshake: an open/read/close of /dev/urandom plus the DRBG's health
# test, about a third of roved's CPU in a reconnect storm.
# WOLFSSL_GETRANDOM: the RNGs that remain seed with getrandom(2), one
# system call without a file descriptor.
# HAVE_AES_ECB: ngtcp2 >= 1.22 protects QUIC headers with AES-ECB.
# HAVE_SECRET_CALLBACK: wolfSSL_CTX_set_keylog_callback, for the opt-in
# KeyLogFile (NSS key log, so Wireshark can decrypt a capture).
WOLFSSL_CFLAGS="-O2 -fPIC -DWOLFSSL_ALWAYS_VERIFY_CB -DHAVE_AES_ECB -DHAVE_SECRET_CALLBACK -DWOLFSSL_GETRANDOM"

# libisal-dev (ISA-L) is the erasure code of the tunnel's loss recovery
# (common/tunnel/fec.c);
# clang and libclang-rt-dev (libFuzzer, the sanitizers) build the fuzzers;
# openssh is the reference for the forwarding benchmarks (bench/forward.sh,
# bench/setup.sh); dbus-daemon runs the private bus of test-dns.sh;
# squid and dante-server are the HTTP and SOCKS5 proxies that rove's
# Proxy setting is tested through, haproxy and nginx the web server that
# shares port 443 with roved (each runs only inside a test's namespace).
PACKAGES=(build-essential pkg-config autoconf automake libtool cmake dpkg-dev patch
	libevent-dev libnl-3-dev libnl-route-3-dev libcap-ng-dev libcmocka-dev
	libsystemd-dev libisal-dev
	iproute2 nftables conntrack iperf3 iputils-ping procps psmisc curl tcpdump
	python3 openssl clang libclang-rt-dev debhelper lintian fakeroot
	python3-prometheus-client tshark openssh-client openssh-server
	dbus-daemon squid dante-server haproxy nginx
	# a DNS server and client that rove did not write, for the UDP
	# forward test (test-fwd-udp), and a SOCKS5 UDP client (PySocks,
	# test-fwd-socks-udp)
	dnsmasq-base bind9-dnsutils python3-socks
	# WireGuard through a UDP forward (test-fwd-udp-wg) and the
	# benchmarks' reference: bookworm's wireguard-go when trixie's
	# (scripts/wireguard-go.sh) cannot be fetched, and wg to set it up
	wireguard-go wireguard-tools)

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
	{
		printf '%s\n' "$WOLFSSL_UPSTREAM" "$NGTCP2_UPSTREAM" "$WOLFSSL_CFLAGS" "${WOLFSSL_CONFIGURE[@]}"
		# Absent for 5.7.2, so that its key is the one it always had.
		[ -z "${WOLFSSL_CONFIGURE_EXTRA[$WOLFSSL_UPSTREAM]:-}" ] ||
			printf '%s\n' ${WOLFSSL_CONFIGURE_EXTRA[$WOLFSSL_UPSTREAM]}
		cat "$PATCHES"/ngtcp2-*.patch
	} | sha256sum | cut -c1-12
}

# Our fixes to ngtcp2 not yet upstream (each patch says what and why).
# One that no longer applies, because the chosen ngtcp2 has moved on, is
# left out with a note: the tests tell whether the fix is still needed.
PATCHES=$(cd "$(dirname "$0")" && pwd)/patches
patch_ngtcp2() {
	local src=$1 p applied=
	for p in "$PATCHES"/ngtcp2-*.patch; do
		if patch -d "$src" -p1 -s -f --dry-run <"$p" >/dev/null 2>&1; then
			patch -d "$src" -p1 -s -f <"$p" >/dev/null
			applied="$applied ${p##*/}"
		else
			log "ngtcp2: ${p##*/} does not apply to this version; built without it"
		fi
	done
	printf '%s\n' "${applied# }"
}

# The suites searched for sources: wolfSSL comes from trixie, ngtcp2 from
# sid, with trixie-backports and trixie as the fallback's other homes.
write_sources_list() {
	local apt=$1
	private_apt_dirs "$apt"
	cat >"$apt/sources.list" <<-SRC
	deb-src http://deb.debian.org/debian trixie main
	deb-src http://deb.debian.org/debian-security trixie-security main
	deb-src http://deb.debian.org/debian trixie-backports main
	deb-src http://deb.debian.org/debian sid main
	SRC
}

# Prints "VERSION SHA256" for every Debian revision of source package $2 the
# suites serve, one per line, with the sha256 its .dsc gives the orig tarball.
source_versions() {
	local apt=$1 pkg=$2
	private_apt_cache "$apt" showsrc "$pkg" 2>/dev/null | awk '
		/^Version: / { ver = $2; sums = 0; next }
		/^Checksums-Sha256:/ { sums = 1; next }
		/^[^ ]/ { sums = 0 }
		sums && $3 ~ /\.orig\.tar\.[a-z0-9]+$/ { print ver, $1 }'
}

# Picks the Debian revision of $2 to build: one whose orig tarball has the
# pinned sha256 if any; else (ngtcp2 only) the newest 1.x >= the fallback
# floor, whose tarball must match a known sha256 where one is recorded.
# Prints "VERSION SHA256".
choose_version() {
	local apt=$1 pkg=$2 upstream=$3 sha=$4 floor=${5:-}
	local versions ver osha up best=
	versions=$(source_versions "$apt" "$pkg" | sort -u)
	while read -r ver osha; do
		[ -n "$ver" ] || continue
		up=${ver%%-*}
		if [ "$up" = "$upstream" ] && [ "$osha" = "$sha" ]; then
			printf '%s %s\n' "$ver" "$osha"
			return 0
		fi
	done <<<"$versions"
	[ -n "$floor" ] || die "$pkg $upstream (orig sha256 $sha) is not on the mirror"
	while read -r ver osha; do
		[ -n "$ver" ] || continue
		up=${ver%%-*}
		case $up in 1.*) ;; *) continue ;; esac
		dpkg --compare-versions "$up" ge "$floor" || continue
		if [ -n "${NGTCP2_KNOWN[$up]:-}" ] && [ "${NGTCP2_KNOWN[$up]}" != "$osha" ]; then
			log "skipping $pkg $ver: orig tarball sha256 differs from the known one"
			continue
		fi
		if [ -z "$best" ] || dpkg --compare-versions "$ver" gt "${best%% *}"; then
			best="$ver $osha"
		fi
	done <<<"$versions"
	[ -n "$best" ] || die "no $pkg 1.x >= $floor on the mirror"
	log "$pkg $upstream is gone from the mirror; falling back to ${best%% *}"
	printf '%s\n' "$best"
}

# Downloads source package $3=$4 into the tarball cache $2 (once), checks the
# orig tarball against $5, and unpacks it (Debian's patches applied) in $6.
# A revision whose .dsc and Debian tarball the mirror lacks while it serves
# the orig tarball (wolfSSL 5.9.2-1.2 in sid) is built from the orig tarball
# alone, without Debian's patches: $5 is both our pin and the sha256 that
# the suite's Sources index lists for it (choose_version checked they
# agree), and that index is covered by the InRelease signature apt checked.
fetch_source() {
	local apt=$1 tarballs=$2 pkg=$3 ver=$4 sha=$5 work=$6
	local dsc="$tarballs/${pkg}_${ver#*:}.dsc" orig err
	if [ ! -f "$dsc" ]; then
		log "fetching $pkg $ver"
		err=$(cd "$tarballs" && private_apt "$apt" source -qq --download-only \
			"$pkg=$ver" 2>&1 >/dev/null) || true
	fi
	orig=$(find "$tarballs" -maxdepth 1 -name "${pkg}_${ver%%-*}.orig.tar.*" ! -name '*.asc' | head -n1)
	[ -n "$orig" ] || die "$pkg $ver: no orig tarball after download: ${err:-}"
	echo "$sha  $orig" | sha256sum -c --quiet - ||
		die "$pkg $ver: $orig does not match sha256 $sha"
	if [ -f "$dsc" ]; then
		dpkg-source --no-check -x "$dsc" "$work/$pkg" >/dev/null
	else
		log "$pkg $ver: the mirror has no .dsc; building the orig tarball" \
			"(sha256 $sha, as the signed Sources index lists it) without Debian's patches"
		mkdir -p "$work/$pkg"
		tar -xf "$orig" -C "$work/$pkg" --strip-components=1
	fi
}

build_wolfssl() {
	local src=$1 prefix=$2
	log "building wolfSSL in $src"
	(cd "$src" && autoreconf -fi >/dev/null 2>&1 &&
		./configure --prefix="$prefix" "${WOLFSSL_CONFIGURE[@]}" \
			${WOLFSSL_CONFIGURE_EXTRA[$WOLFSSL_UPSTREAM]:-} \
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
	local root hash prefix
	root=$(cache_root)
	hash=$(config_hash)
	mkdir -p "$root"
	log "wolfSSL $WOLFSSL_UPSTREAM, cache key $hash"
	# One build at a time per cache: two work trees building at once
	# would otherwise share (and wipe) the same temporary prefix.
	exec 9>"$root/.lock"
	flock 9
	prefix="$root/wolfssl-${WOLFSSL_UPSTREAM}_ngtcp2-${NGTCP2_UPSTREAM}_$hash"
	if [ ! -f "$prefix/.complete" ]; then
		# A fallback ngtcp2 built earlier serves until the mirror is asked.
		local cached
		cached=$(ls -d "$root"/wolfssl-"${WOLFSSL_UPSTREAM}"_ngtcp2-1.*_"$hash" 2>/dev/null |
			sort -V | tail -n1 || true)
		if [ -n "$cached" ] && [ -f "$cached/.complete" ]; then
			prefix=$cached
		else
			prefix=$(build_all "$root" "$hash")
		fi
	fi
	ln -sfn "$prefix" "$link"
}

# Fetches, verifies and builds both libraries; prints the install prefix.
build_all() {
	local root=$1 hash=$2
	local tarballs="$root/sources" work apt wver wsha nver nsha prefix patched
	mkdir -p "$root" "$tarballs"
	BUILD_DIR=$(mktemp -d "$root/build.XXXXXX")
	trap 'rm -rf "$BUILD_DIR"' EXIT
	work=$BUILD_DIR
	apt="$work/apt"
	write_sources_list "$apt"
	private_apt "$apt" update -qq >/dev/null
	wver= wsha=
	read -r wver wsha < <(choose_version "$apt" wolfssl "$WOLFSSL_UPSTREAM" "$WOLFSSL_SHA256") || true
	if [ -n "$wver" ] && (fetch_source "$apt" "$tarballs" wolfssl "$wver" "$wsha" "$work"); then
		:
	elif [ -z "${ROVE_WOLFSSL:-}" ] && [ "$WOLFSSL_UPSTREAM" != "$WOLFSSL_FALLBACK" ]; then
		# The preferred wolfSSL cannot be had: build the fallback,
		# or take its build from the cache.
		log "wolfSSL $WOLFSSL_UPSTREAM cannot be fetched; using $WOLFSSL_FALLBACK:" \
			"no post-quantum key exchange (X25519MLKEM768)"
		rm -rf "$work/wolfssl"
		WOLFSSL_UPSTREAM=$WOLFSSL_FALLBACK
		WOLFSSL_SHA256=${WOLFSSL_KNOWN[$WOLFSSL_FALLBACK]}
		hash=$(config_hash)
		prefix=$(ls -d "$root"/wolfssl-"${WOLFSSL_UPSTREAM}"_ngtcp2-1.*_"$hash" 2>/dev/null |
			sort -V | tail -n1 || true)
		if [ -n "$prefix" ] && [ -f "$prefix/.complete" ]; then
			printf '%s\n' "$prefix"
			return 0
		fi
		read -r wver wsha < <(choose_version "$apt" wolfssl "$WOLFSSL_UPSTREAM" "$WOLFSSL_SHA256")
		[ -n "$wver" ] || die "no usable wolfSSL on the mirror"
		fetch_source "$apt" "$tarballs" wolfssl "$wver" "$wsha" "$work"
	else
		die "wolfSSL $WOLFSSL_UPSTREAM cannot be fetched"
	fi
	read -r nver nsha < <(choose_version "$apt" ngtcp2 "$NGTCP2_UPSTREAM" "$NGTCP2_SHA256" "$NGTCP2_FALLBACK_MIN")
	[ -n "$nver" ] || die "no usable source versions"
	fetch_source "$apt" "$tarballs" ngtcp2 "$nver" "$nsha" "$work"
	prefix="$root/wolfssl-${WOLFSSL_UPSTREAM}_ngtcp2-${nver%%-*}_$hash"
	rm -rf "$prefix.tmp"
	patched=$(patch_ngtcp2 "$work/ngtcp2")
	build_wolfssl "$work/wolfssl" "$prefix.tmp"
	build_ngtcp2 "$work/ngtcp2" "$prefix.tmp"
	# Record exactly which Debian revisions, tarballs and patches went in.
	printf 'wolfssl %s %s\nngtcp2 %s %s\npatches %s\n' "$wver" "$wsha" "$nver" "$nsha" \
		"${patched:-none}" >"$prefix.tmp/SOURCES"
	touch "$prefix.tmp/.complete"
	rm -rf "$prefix"
	mv "$prefix.tmp" "$prefix"
	printf '%s\n' "$prefix"
}

main "$@"
