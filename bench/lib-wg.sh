# shellcheck shell=bash
# wireguard-go tunnels for the benchmarks (bench/run.sh, bench/lossy.sh)
# and for tests/e2e/test-fwd-udp-wg.sh (wg_up, wg_down).
# Sourced after tests/e2e/lib.sh, whose bg/stop_pid/wait_for it uses.
#
#   wg_find            sets WG_NEW_BIN/WG_NEW_VER (trixie's, with offloads,
#                      scripts/wireguard-go.sh) and WG_OLD_BIN/WG_OLD_VER
#                      (bookworm's, /usr/bin); a missing one stays empty
#   wg_up TAG BIN NS_S NS_C SERVER_ADDR
#                      a tunnel 198.18.100.2 (NS_C) -> 198.18.100.1 (NS_S),
#                      MTU 1420, the server on SERVER_ADDR:51820; sets
#                      WG_S_PID and WG_C_PID; returns non-zero if no ping
#                      crosses it within 10 s
#   wg_down            stops the processes of the last wg_up

WG_S_ADDR=198.18.100.1
WG_C_ADDR=198.18.100.2
WG_PORT=51820

# wg and bookworm's wireguard-go come from the host's own suite; trixie's
# is fetched into the dependency cache, since bookworm has no build with
# the offloads that make it the bar.
wg_find() {
	WG_NEW_BIN='' WG_NEW_VER='' WG_OLD_BIN='' WG_OLD_VER=''
	if [ ! -x /usr/bin/wireguard-go ] || ! command -v wg >/dev/null; then
		if [ "$(id -u)" -eq 0 ]; then
			log "installing wireguard-go and wireguard-tools"
			apt-get update -qq &&
				DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
					--no-install-recommends wireguard-go wireguard-tools >/dev/null ||
				log "cannot install bookworm's wireguard-go or wg"
		fi
	fi
	if [ -x /usr/bin/wireguard-go ]; then
		WG_OLD_BIN=/usr/bin/wireguard-go
		WG_OLD_VER=$(dpkg-query -W -f='${Version}' wireguard-go 2>/dev/null)
		WG_OLD_VER=${WG_OLD_VER%%-*}
	fi
	if WG_NEW_BIN=$("$TOP/scripts/wireguard-go.sh") &&
		WG_NEW_VER=$("$TOP/scripts/wireguard-go.sh" --version); then
		WG_NEW_VER=${WG_NEW_VER%%-*}
	else
		log "cannot fetch trixie's wireguard-go; its figures will be missing"
		WG_NEW_BIN='' WG_NEW_VER=''
	fi
}

wg_links() {
	ip -n "$WG_NS_S" link show "$WG_IF_S" >/dev/null 2>&1 &&
		ip -n "$WG_NS_C" link show "$WG_IF_C" >/dev/null 2>&1
}

wg_pings() { nsx "$WG_NS_C" ping -c 1 -W 1 "$WG_S_ADDR" >/dev/null 2>&1; }

wg_up() {
	local tag=$1 bin=$2 sk=$WORK/wg-$1-s.key ck=$WORK/wg-$1-c.key
	WG_NS_S=$3 WG_NS_C=$4
	local server=$5
	# The UAPI sockets in /var/run/wireguard are shared by every
	# namespace, so the names carry this run's PID.
	WG_IF_S=wg$tag$$s
	WG_IF_C=wg$tag$$c
	WG_S_PID='' WG_C_PID=''
	if [ -z "$bin" ] || [ ! -x "$bin" ]; then
		log "no wireguard-go binary for $tag"
		return 1
	fi
	command -v wg >/dev/null || { log "wg (wireguard-tools) is not installed"; return 1; }
	(umask 077 && wg genkey >"$sk" && wg genkey >"$ck") || return 1
	# Foreground, so that $! is the process to measure and to stop.
	bg "wg-$tag-server" "$WG_NS_S" env WG_PROCESS_FOREGROUND=1 \
		WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1 "$bin" -f "$WG_IF_S"
	WG_S_PID=$BG_PID
	bg "wg-$tag-client" "$WG_NS_C" env WG_PROCESS_FOREGROUND=1 \
		WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1 "$bin" -f "$WG_IF_C"
	WG_C_PID=$BG_PID
	wait_for 10 "wireguard-go interfaces ($tag)" wg_links || return 1
	nsx "$WG_NS_S" wg set "$WG_IF_S" listen-port "$WG_PORT" private-key "$sk" \
		peer "$(wg pubkey <"$ck")" allowed-ips "$WG_C_ADDR/32" || return 1
	nsx "$WG_NS_C" wg set "$WG_IF_C" private-key "$ck" \
		peer "$(wg pubkey <"$sk")" endpoint "$server:$WG_PORT" \
		allowed-ips "${WG_S_ADDR%.*}.0/24" || return 1
	ip -n "$WG_NS_S" addr add "$WG_S_ADDR/24" dev "$WG_IF_S" || return 1
	ip -n "$WG_NS_C" addr add "$WG_C_ADDR/24" dev "$WG_IF_C" || return 1
	ip -n "$WG_NS_S" link set "$WG_IF_S" mtu 1420 up || return 1
	ip -n "$WG_NS_C" link set "$WG_IF_C" mtu 1420 up || return 1
	wait_for 10 "a ping through wireguard-go ($tag)" wg_pings
}

wg_down() {
	stop_pids "${WG_C_PID:-}" "${WG_S_PID:-}"
	WG_S_PID='' WG_C_PID=''
}
