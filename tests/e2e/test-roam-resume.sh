#!/usr/bin/env bash
# A laptop that sleeps: rove stopped (SIGSTOP) for 8 s just as the network
# goes quiet (what it sent last is never acknowledged), while the NAT
# forgets its mapping; then the network and rove wake up. Transport = auto,
# and roved listens on TCP too. The silence rove measured across the sleep
# is stale: QUIC answers again within a round trip (a new NAT mapping), so
# rove must not even try TCP (no SYN to roved's port 443 at the router), the
# session stays on QUIC (no switch, no reconnect), pings resume within a
# second, and a forward connection open across the sleep keeps working.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up
roam_configs
server_key "$RCONF_S" ListenTCP "$S_OUT:443"
nsx "$RNS_R" nft -f - <<EOF || die "cannot load the router's SYN counter"
table ip resume {
	counter syn443 { }
	chain through {
		type filter hook forward priority 0; policy accept;
		ip daddr $S_OUT tcp dport 443 tcp flags & (syn | ack) == syn counter name "syn443"
	}
}
EOF
syn_count() {
	nsx "$RNS_R" nft -j list counter ip resume syn443 |
		"$PY" -c 'import json,sys; d=json.load(sys.stdin)["nftables"]; print([o["counter"]["packets"] for o in d if "counter" in o][0])'
}
# quiet on|off: the router drops every UDP packet, or not.
quiet() { roam_drop quiet "$1" 'meta l4proto udp drop'; }
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"
roam_fwd_sink

# sleep_once NAME: 2 s of traffic, 8 s asleep (the NAT forgets meanwhile),
# then awake; the ping and a slow transfer span it all.
sleep_once() {
	local name=$1 t_wake syn0
	syn0=$(syn_count)
	traffic_start "$name" 16 2M
	sleep 2
	quiet on || die "cannot drop UDP at the router"
	sleep 0.05
	kill -STOP "$LAP_PID"
	sleep 8
	nsx "$RNS_R" conntrack -F >/dev/null 2>&1
	quiet off
	t_wake=$(now_s)
	kill -CONT "$LAP_PID"
	log "$name: rove woke up at $t_wake"
	traffic_end "$name" "$t_wake"
	assert_cmp "$name: first ping reply after waking (ms)" \
		"$(jf "$GAPS" first_after_ms)" -le 1000
	assert_eq "$name: the forward connection open across the sleep, sha256 equal" \
		1 "$(jf "$XFER" ok)"
	assert_eq "$name: transport" quic "$(cget transport)"
	assert_eq "$name: TCP connections tried (SYNs to roved's 443)" 0 \
		"$(($(syn_count) - syn0))"
	assert_eq "$name: moves to TCP" 0 "$(cget tcp_fallbacks)"
	assert_eq "$name: client's handshakes" 1 "$(cget handshakes)"
	assert_eq "$name: client reconnects" 0 "$(cget reconnects)"
	assert_eq "$name: roved's handshakes" 1 "$(sgetp handshakes)"
}
sleep_once first
sleep_once second
roam_stop_all
roam_finish
