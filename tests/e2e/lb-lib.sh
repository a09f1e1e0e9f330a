# Two roved members behind a connection-ID-routing balancer, for
# tests/e2e/test-lb.sh and bench/lb.sh (docs/SCALING.md section 3). The
# members share the service address $LB_VIP (on their lo), the server key,
# the peers and a KeyDir; each has its own ServerID (01, 02), StateDir and
# control socket. Sources lib.sh.
#
#   +-- client namespace --+     +-- $LB_NS (balancer) -------------+
#   | eth0 198.18.50.2 ----|-----| bc 198.18.50.1                   |
#   +----------------------+     |  mark by CID server ID, or hash  |
#                                |  of the source for a first flight|
#                                |  [masquerade random to backends] |
#                                | b1 198.18.51.1    b2 198.18.52.1 |
#                                +----|--------------------|--------+
#   +-- $LB_NS1 (ServerID 01) ---+   +-- $LB_NS2 (ServerID 02) ---+
#   | eth0 198.18.51.2, lo VIP   |   | eth0 198.18.52.2, lo VIP   |
#   +----------------------------+   +----------------------------+
#
# Usage:
#	. "$(dirname "$0")/lb-lib.sh"
#	e2e_init BUILD_DIR (or load_init)
#	lb_topo_up CLIENT_NS      # CLIENT_NS made by the caller
#	lb_rules 1 2 0 [nat]      # marks for server IDs 01, 02; 0: hash
#	lb_member_confs CONFIG    # $WORK/configs/lb-roved{1,2}.conf
#	lb_start_members          # $LB_PID1 $LB_PID2, sockets $LB_SOCK1/2
# shellcheck disable=SC2034
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

LB_NS=rove-$$-lbb
LB_NS1=rove-$$-lb1
LB_NS2=rove-$$-lb2
LB_VIP=198.18.53.1
LB_CLIENT=198.18.50.2
LB_PORT=4433

# lb_topo_up CLIENT_NS [ROUTED_PREFIX]: the balancer and the two members;
# CLIENT_NS gets eth0 with $LB_CLIENT; ROUTED_PREFIX (the client's other
# source addresses) is routed to it.
lb_topo_up() {
	local ns i
	for ns in "$LB_NS" "$LB_NS1" "$LB_NS2"; do
		ns_add "$ns"
	done
	for ns in "$1" "$LB_NS" "$LB_NS1" "$LB_NS2"; do
		nsx "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0 \
			net.ipv4.conf.default.rp_filter=0
	done
	veth "$1" eth0 "$LB_NS" bc
	veth "$LB_NS" b1 "$LB_NS1" eth0
	veth "$LB_NS" b2 "$LB_NS2" eth0
	ip -n "$1" addr add "$LB_CLIENT/24" dev eth0
	ip -n "$1" route add default via 198.18.50.1
	ip -n "$LB_NS" addr add 198.18.50.1/24 dev bc
	[ -n "${2:-}" ] && ip -n "$LB_NS" route add "$2" via "$LB_CLIENT"
	nsx "$LB_NS" sysctl -qw net.ipv4.ip_forward=1
	for i in 1 2; do
		ns=$LB_NS1
		[ "$i" = 2 ] && ns=$LB_NS2
		ip -n "$LB_NS" addr add "198.18.5$i.1/24" dev "b$i"
		ip -n "$ns" addr add "198.18.5$i.2/24" dev eth0
		ip -n "$ns" addr add "$LB_VIP/32" dev lo
		ip -n "$ns" route add default via "198.18.5$i.1"
		# Mark i routes the service address to member i; an unmarked
		# datagram to it has no route.
		ip -n "$LB_NS" rule add fwmark "$i" lookup "10$i"
		ip -n "$LB_NS" route add "$LB_VIP/32" via "198.18.5$i.2" table "10$i"
	done
	ip -n "$LB_NS" route add blackhole "$LB_VIP/32"
	wait_for 10 "both members reachable from the client" \
		nsx "$1" sh -c 'ping -c1 -W1 198.18.51.2 && ping -c1 -W1 198.18.52.2' \
		>/dev/null 2>&1 || die "the balancer does not route"
}

# lb_rules MARK_FOR_01 MARK_FOR_02 HASH [nat]: the balancer's ruleset;
# HASH 0 spreads first flights over both members by a hash of the source,
# else sends them all to member HASH. With "nat", the balancer also
# masquerades with random ports toward the members, standing in for a NAT
# on the client's side: conntrack -F there rebinds every client. Without
# it the members see each client's own address, as behind a balancer
# that keeps sources (Katran, or a router with DSR). The UDP payload starts at bit 64 of the
# transport header. Short header: first bit 0, the DCID from octet 1; long
# header: first bit 1, DCID length at octet 5, the DCID from octet 6. A
# rove CID is 16 octets, its first 0x0f (QUIC-LB config 0, self-encoded
# length 15), then the server ID.
lb_rules() {
	local hash="jhash ip saddr . udp sport mod 2 offset 1" nat=
	[ "$3" != 0 ] && hash=$3
	[ "${4:-}" = nat ] && nat='oifname { "b1", "b2" } masquerade random'
	nsx "$LB_NS" nft -f - <<-EOF || die "cannot load the balancer's rules"
	flush ruleset
	table ip lb {
		counter by_sid1 {}
		counter by_sid2 {}
		counter by_hash {}
		chain pre {
			type filter hook prerouting priority mangle; policy accept;
			ip daddr $LB_VIP udp dport $LB_PORT jump quic
		}
		chain quic {
			@th,64,1 0 @th,72,8 0x0f @th,80,8 0x01 meta mark set $1 counter name by_sid1 accept
			@th,64,1 0 @th,72,8 0x0f @th,80,8 0x02 meta mark set $2 counter name by_sid2 accept
			@th,64,1 1 @th,104,8 16 @th,112,8 0x0f @th,120,8 0x01 meta mark set $1 counter name by_sid1 accept
			@th,64,1 1 @th,104,8 16 @th,112,8 0x0f @th,120,8 0x02 meta mark set $2 counter name by_sid2 accept
			meta mark set $hash counter name by_hash
		}
		chain post {
			type nat hook postrouting priority srcnat; policy accept;
			$nat
		}
	}
	EOF
}

# lb_counter NAME: packets the balancer's counter NAME has seen.
lb_counter() {
	nsx "$LB_NS" nft list counter ip lb "$1" | sed -n 's/.*packets \([0-9]*\).*/\1/p'
}

# lb_member_confs CONFIG: the two members' configs from a roved CONFIG in
# $WORK/configs: listening on the service address, one KeyDir, each its
# own ServerID, StateDir and control socket.
lb_member_confs() {
	local i
	for i in 1 2; do
		sed -e "s/^Listen = .*/Listen = $LB_VIP:$LB_PORT/" \
			-e "s|^StateDir = .*|StateDir = $WORK/lb-state$i\nKeyDir = $WORK/lb-keys\nServerID = 0$i|" \
			-e "s|^ControlSocket = .*|ControlSocket = $WORK/lb-run$i/roved.sock|" \
			"$1" >"$WORK/configs/lb-roved$i.conf"
	done
	LB_SOCK1=$WORK/lb-run1/roved.sock
	LB_SOCK2=$WORK/lb-run2/roved.sock
}

# lb_start_members: both members, up when their control sockets answer.
lb_start_members() {
	bg roved1 "$LB_NS1" "$BUILD/roved" -f -c "$WORK/configs/lb-roved1.conf"
	LB_PID1=$BG_PID
	bg roved2 "$LB_NS2" "$BUILD/roved" -f -c "$WORK/configs/lb-roved2.conf"
	LB_PID2=$BG_PID
	wait_for 10 "member 1" status_ok "$LB_NS1" "$LB_SOCK1" || die "member 1 did not start"
	wait_for 10 "member 2" status_ok "$LB_NS2" "$LB_SOCK2" || die "member 2 did not start"
}

# lb_ns N / lb_sock N: member N's namespace and control socket.
lb_ns() { if [ "$1" = 1 ]; then echo "$LB_NS1"; else echo "$LB_NS2"; fi; }
lb_sock() { if [ "$1" = 1 ]; then echo "$LB_SOCK1"; else echo "$LB_SOCK2"; fi; }
