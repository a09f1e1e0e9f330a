#!/usr/bin/env bash
# TUN offloads with two peers and at the size edges (Offload = auto):
#  1. The laptop and the branch upload to the LAN host at once. roved's TUN
#     is shared, so one receive batch may mix both peers' packets: each
#     flow must arrive coalesced (super-packets from both sources in a
#     capture on roved's rove0) and neither is starved (each moves at
#     least a fifth of the pair's bytes).
#  2. With a TUN MTU of 1500, larger than what one DATAGRAM carries
#     (datagram_mtu), a TCP flow whose segments exactly fill a DATAGRAM
#     and one whose segments are one byte larger both get through: the
#     first as is, the second re-cut by the sender's segmentation rather
#     than refused. No packet is dropped as too big or malformed.
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
command -v iperf3 >/dev/null || die "iperf3 is not installed (scripts/deps.sh installs it)"
command -v tcpdump >/dev/null || die "tcpdump is not installed (scripts/deps.sh installs it)"
topo_up
C=$WORK/configs
for f in roved.conf rove.conf rove2.conf; do
	grep -q '^Offload' "$C/$f" && conf_set "$C/$f" Offload auto
done
conf_set "$C/roved.conf" MTU 1500

iperf_listening() { nsx "$NS_LAN" ss -Hltn "sport = :$1" | grep -q "$1"; }
bg iperf3-a "$NS_LAN" iperf3 -s -B "$LAN_HOST" -p 5201
bg iperf3-b "$NS_LAN" iperf3 -s -B "$LAN_HOST" -p 5202
wait_for 10 "iperf3 servers" iperf_listening 5202 || die "iperf3 server does not start"
start_roved
start_client laptop
start_client branch
wait_established laptop || die "laptop's tunnel does not come up"
wait_established branch || die "branch's tunnel does not come up"

# received JSON: the bytes iperf3's receiver counted.
received() {
	"$PY" -c 'import json, sys
e = json.load(open(sys.argv[1]))["end"]
print(int(e["sum_received"]["bytes"]))' "$1" 2>/dev/null || echo 0
}

# 1. Both peers at once, captured on roved's TUN (super-packets only).
br_addr=$(sget "$NS_BR" "$BR_SOCK" 'address[0]'); br_addr=${br_addr%/*}
lap_addr=$(sget "$NS_LAP" "$LAP_SOCK" 'address[0]'); lap_addr=${lap_addr%/*}
bg tcpdump "$NS_SRV" tcpdump -i rove0 -nn --immediate-mode -U -w "$WORK/srv.pcap" greater 1501
cap=$BG_PID
wait_for 10 "tcpdump" grep -q "listening on" "$WORK/tcpdump.log" || die "tcpdump does not start"
nsx "$NS_LAP" timeout 30 iperf3 -c "$LAN_HOST" -p 5201 -t 4 -J >"$WORK/a.json" 2>&1 &
a=$!
nsx "$NS_BR" timeout 30 iperf3 -c "$LAN_HOST" -p 5202 -t 4 -J >"$WORK/b.json" 2>&1 &
b=$!
wait "$a"; ra=$?
wait "$b"; rb=$?
sleep 0.5
stop_pid "$cap"; forget_pid "$cap"
expect_eq "laptop's iperf3 exit status" 0 "$ra"
expect_eq "branch's iperf3 exit status" 0 "$rb"
ba=$(received "$WORK/a.json") bb=$(received "$WORK/b.json")
log "at once: laptop $ba bytes, branch $bb bytes"
for pair in "laptop $ba" "branch $bb"; do
	set -- $pair
	if [ $(($2 * 5)) -ge $((ba + bb)) ] && [ "$2" -gt 0 ]; then
		ok "$1 got $2 of $((ba + bb)) bytes (at least a fifth)"
	else
		fail "$1 got $2 of $((ba + bb)) bytes (starved)"
	fi
done
for pair in "laptop $lap_addr" "branch $br_addr"; do
	set -- $pair
	n=$(tcpdump -r "$WORK/srv.pcap" -nn "src host $2" 2>/dev/null | wc -l)
	if [ "$n" -gt 0 ]; then
		ok "roved wrote $n super-packets of the $1's flow ($2) to its TUN"
	else
		fail "roved wrote no super-packet of the $1's flow ($2)"
	fi
done

# 2. The size edges, from the laptop.
dmtu=$(srv_get 'datagram_mtu')
log "datagram_mtu $dmtu, TUN MTU 1500"
[ "$dmtu" -lt 1500 ] || die "datagram_mtu $dmtu leaves no edge below the TUN MTU"
before=$(srv_get drops.too_big)
for extra in 0 1; do
	mss=$((dmtu - 40 + extra))
	rc=0
	nsx "$NS_LAP" timeout 30 iperf3 -c "$LAN_HOST" -p 5201 -t 2 -M "$mss" -J \
		>"$WORK/mss$extra.json" 2>&1 || rc=$?
	expect_eq "MSS $mss (IP packet = datagram_mtu + $extra): iperf3 exit status" 0 "$rc"
	n=$(received "$WORK/mss$extra.json")
	if [ "$n" -gt 1000000 ]; then
		ok "MSS $mss: $n bytes arrived"
	else
		fail "MSS $mss: only $n bytes arrived"
	fi
done
for who in srv lap; do
	if [ $who = srv ]; then g=srv_get; else g="sget $NS_LAP $LAP_SOCK"; fi
	expect_eq "$who: bad_offload drops" 0 "$($g drops.bad_offload)"
	expect_eq "$who: invalid_packet drops" 0 "$($g drops.invalid_packet)"
done
expect_eq "roved: too_big drops during the edge runs" "$before" "$(srv_get drops.too_big)"
e2e_finish
