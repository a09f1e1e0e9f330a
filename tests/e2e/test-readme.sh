#!/usr/bin/env bash
# The README's worked example ("Running a real server and client"), run as
# written: every block between its markers, in order, on the host it names
# (tests/e2e/readme-blocks.py extracts them), so that the README cannot
# drift from what works. Only what must differ on one machine is mapped:
#
#   README                      here
#   vpn.example.net             198.18.60.1, the server's outer address
#                               (/etc/netns/NS/hosts of laptop and branch)
#   192.168.10.0/24, .5         198.18.10.0/24, .5 (the server's LAN, a web
#                               server on port 80)
#   192.168.50.0/24, .10        198.18.50.0/24, .10 (the branch's LAN)
#   /etc/rove, /var/lib/rove,   $WORK/HOST/etc/rove, ... (each host's own)
#   /run/rove
#   rove, roved                 this build's
#
#   laptop 198.18.60.2 --+                     +-- branch 198.18.60.3 --- 198.18.50.0/24
#                        +-- switch (bridge) --+                             .10: a host
#   server 198.18.60.1 --+
#     |
#   198.18.10.0/24, .5: a web server
#
# A command that starts roved or rove (not -n) runs in the background and
# the next block waits until it is up (roved answering status, a client's
# session established). The public keys step 1 prints stand in for the
# "<the laptop's public key>" placeholders. Before step 9 the laptop's
# UDP to port 443 is dropped (nftables), and its session must move to
# TLS over TCP before the step's commands run. Every other command must
# exit 0; the curl lines must return the page they reach.
# e2e: light
. "$(dirname "$0")/fwd-lib.sh"
TEST_NAME=readme
fwd_init "$@"
command -v curl >/dev/null || die "curl is not installed (scripts/deps.sh installs it)"

S_OUT=198.18.60.1 L_OUT=198.18.60.2 B_OUT=198.18.60.3
quiet_ping() { nsx "$1" ping -c 1 -W 1 "$2" >/dev/null 2>&1; }
NS_RLAN=rove-$$-rlan NS_BLAN=rove-$$-blan

for ns in "$NS_SW" "$NS_SRV" "$NS_LAP" "$NS_BR" "$NS_RLAN" "$NS_BLAN"; do
	ns_add "$ns"
done
ip -n "$NS_SW" link add br0 type bridge && ip -n "$NS_SW" link set br0 up
for pair in "p-srv $NS_SRV $S_OUT" "p-lap $NS_LAP $L_OUT" "p-br $NS_BR $B_OUT"; do
	set -- $pair
	veth "$NS_SW" "$1" "$2" eth0
	ip -n "$NS_SW" link set "$1" master br0
	ip -n "$2" addr add "$3/24" dev eth0
done
veth "$NS_SRV" eth1 "$NS_RLAN" eth0
ip -n "$NS_SRV" addr add 198.18.10.1/24 dev eth1
ip -n "$NS_RLAN" addr add 198.18.10.5/24 dev eth0
ip -n "$NS_RLAN" route add default via 198.18.10.1
veth "$NS_BR" eth1 "$NS_BLAN" eth0
ip -n "$NS_BR" addr add 198.18.50.1/24 dev eth1
ip -n "$NS_BLAN" addr add 198.18.50.10/24 dev eth0
ip -n "$NS_BLAN" route add default via 198.18.50.1
wait_for 10 "the outer network" quiet_ping "$NS_LAP" "$S_OUT" || die "the outer network does not come up"
netns_etc "$NS_LAP" hosts "$S_OUT vpn.example.net"
netns_etc "$NS_BR" hosts "$S_OUT vpn.example.net"

# The pages the curl lines must get: the server LAN's web server, and the
# branch gateway's own port 80 (its RemoteForward's target).
mkdir -p "$WORK/web-lan" "$WORK/web-branch"
echo "the server's LAN" >"$WORK/web-lan/index.html"
echo "the branch gateway" >"$WORK/web-branch/index.html"
bg web-lan "$NS_RLAN" "$PY" -m http.server 80 --bind 198.18.10.5 --directory "$WORK/web-lan"
bg web-branch "$NS_BR" "$PY" -m http.server 80 --bind 127.0.0.1 --directory "$WORK/web-branch"
wait_listen "$NS_RLAN" 80 "the LAN's web server"
wait_listen "$NS_BR" 80 "the branch's web server"

ns_of() {
	case $1 in
	server) echo "$NS_SRV" ;;
	laptop) echo "$NS_LAP" ;;
	branch) echo "$NS_BR" ;;
	*) die "the README names an unknown host '$1'" ;;
	esac
}

# mapped HOST TEXT: TEXT with this machine's addresses, paths and keys.
declare -A PUB
mapped() {
	local h=$WORK/$1
	sed -e "s|/etc/rove|$h/etc/rove|g" -e "s|/var/lib/rove|$h/var/lib/rove|g" \
		-e "s|/run/rove|$h/run/rove|g" \
		-e "s|192\.168\.10\.|198.18.10.|g" -e "s|192\.168\.50\.|198.18.50.|g" \
		-e "s|<the server's public key>|${PUB[server]:-MISSING}|g" \
		-e "s|<the laptop's public key>|${PUB[laptop]:-MISSING}|g" \
		-e "s|<the branch's public key>|${PUB[branch]:-MISSING}|g" <<<"$2"
}

status_at() { nsx "$1" "$BUILD/rove" status -c "$2" --json >/dev/null 2>&1; }

# up_wait NS CONFIG roved|rove NAME: the daemon just started with CONFIG
# is up.
ROVED_UP=
up_wait() {
	local ns=$1 conf=$2
	if [ "$3" = roved ]; then
		wait_for 10 "roved answering" status_at "$ns" "$conf" \
			>/dev/null || fail "step $STEP: roved did not come up: $(tail -n 5 "$WORK/$4.log")"
	else
		wait_for 15 "$4 established" state_is "$ns" "$(conf_path "$conf" ControlSocket)" \
			'peers[0].state' established ||
			fail "step $STEP: $4 did not connect: $(tail -n 5 "$WORK/$4.log")"
	fi
}

transport_of() { sget "$NS_LAP" "$(conf_path "$LAPTOP_CONF" ControlSocket)" 'peers[0].transport'; }
on_tcp() { [ "$(transport_of 2>/dev/null)" = tcp ]; }

"$PY" "$E2E_DIR/readme-blocks.py" "$TOP/README.md" "$WORK/blocks" >"$WORK/blocks.txt" ||
	die "cannot read the README's worked example"
read -r NSTEPS NBLOCKS NCMDS <"$WORK/blocks.txt"
log "the README's worked example: $NSTEPS steps, $NBLOCKS blocks, $NCMDS commands"
expect_eq "the worked example's steps" 9 "$NSTEPS"

LAPTOP_CONF=
for b in "$WORK"/blocks/*; do
	{ read -r STEP; read -r host; read -r path; } <"$b"
	ns=$(ns_of "$host")
	if [ "$STEP" = 9 ] && [ -z "${UDP_BLOCKED:-}" ]; then
		UDP_BLOCKED=1
		nsx "$NS_LAP" nft -f - <<-'NFT' || die "cannot block the laptop's UDP"
		table inet readme {
			chain out {
				type filter hook output priority 0; policy accept;
				udp dport 443 drop
			}
		}
		NFT
		if wait_for 20 "the laptop's session on TCP" on_tcp; then
			ok "step 9: with UDP blocked the laptop's session moved to TLS over TCP"
		else
			fail "step 9: the laptop's session did not move to TCP: $(transport_of)"
		fi
	fi
	case $b in
	*.file)
		f=$(mapped "$host" "$path")
		mkdir -p "$(dirname "$f")"
		mapped "$host" "$(tail -n +4 "$b")" >"$f"
		chmod 600 "$f"
		[[ $path == */laptop.conf ]] && LAPTOP_CONF=$f
		log "step $STEP, $host: wrote $path"
		;;
	*.sh)
		while IFS= read -r line; do
			[ -n "$line" ] || continue
			cmd=$(mapped "$host" "$line")
			case $line in
			"roved -c "* | "rove up -c "*)
				name=$host-$(basename "${line##* }" .conf)
				# shellcheck disable=SC2086
				bg "$name" "$ns" env "PATH=$BUILD:$PATH" $cmd
				up_wait "$ns" "${cmd##* }" "${line%% *}" "$name"
				ok "step $STEP, $host: $line: up"
				;;
			"curl "*)
				page=$(nsx "$ns" env "PATH=$BUILD:$PATH" timeout 20 sh -c "$cmd" 2>&1)
				want=$([ "$host" = server ] && cat "$WORK/web-branch/index.html" ||
					cat "$WORK/web-lan/index.html")
				expect_eq "step $STEP, $host: $line" "$want" "$page"
				;;
			*)
				if out=$(nsx "$ns" env "PATH=$BUILD:$PATH" timeout 20 sh -c "$cmd" 2>&1); then
					ok "step $STEP, $host: $line"
				else
					fail "step $STEP, $host: $line: exit $?: $out"
				fi
				case $line in
				"rove pubkey < "*) PUB[$host]=$out ;;
				esac
				;;
			esac
		done < <(tail -n +4 "$b")
		;;
	esac
done
for h in server laptop branch; do
	[ -n "${PUB[$h]:-}" ] || fail "step 1 printed no public key for $h"
done
e2e_finish
