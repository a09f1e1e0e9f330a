#!/usr/bin/env bash
# TUN offloads (Offload = auto | off): iperf3 TCP and UDP through the tunnel
# in both directions over IPv4 and IPv6; a capture on the receiving TUN shows
# super-packets (longer than the MTU) written only with offloads on; a TUN
# read and a TUN write failing with EINVAL (forced through the
# ROVE_TEST_TUN_EINVAL hook) turn the offloads off with one log line each,
# and traffic keeps flowing.
#
#   laptop (rove) --- roved --- LAN host 198.19.10.2 (iperf3, IPv4)
#                       `-- iperf3 on roved's side, reached at fd00:77::1
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
command -v iperf3 >/dev/null || die "iperf3 is not installed (scripts/deps.sh installs it)"
command -v tcpdump >/dev/null || die "tcpdump is not installed (scripts/deps.sh installs it)"
topo_up

LAP_CONF=$WORK/configs/rove.conf
SRV_CONF=$WORK/configs/roved.conf
ROVED_SOCK=$(conf_path "$SRV_CONF" ControlSocket)

# start_pair MODE [ENV_SRV [ENV_LAP]]: roved and the laptop with
# Offload = MODE, each optionally with ROVE_TEST_TUN_EINVAL set; logs go
# to roved-MODE.log and laptop-MODE.log.
start_pair() {
	local mode=$1 esrv=${2:-} elap=${3:-} tag=$1${2:+-einval}
	conf_set "$SRV_CONF" Offload "$mode"
	conf_set "$LAP_CONF" Offload "$mode"
	bg "roved-$tag" "$NS_SRV" env ${esrv:+ROVE_TEST_TUN_EINVAL=$esrv} \
		"$BUILD/roved" -f -c "$SRV_CONF"
	ROVED_PID=$BG_PID
	wait_for 10 "roved's control socket" status_ok "$NS_SRV" "$ROVED_SOCK" ||
		die "roved did not come up"
	bg "laptop-$tag" "$NS_LAP" env ${elap:+ROVE_TEST_TUN_EINVAL=$elap} \
		"$BUILD/rove" up -f -c "$LAP_CONF"
	LAP_PID=$BG_PID
	LAP_SOCK=$(conf_path "$LAP_CONF" ControlSocket)
	wait_established laptop || die "laptop's tunnel does not come up ($mode)"
	SRV_LOG=$WORK/roved-$tag.log
	LAP_LOG=$WORK/laptop-$tag.log
}

stop_pair() {
	stop_pid "$LAP_PID"
	forget_pid "$LAP_PID"
	stop_pid "$ROVED_PID"
	forget_pid "$ROVED_PID"
}

lap_get() { sget "$NS_LAP" "$LAP_SOCK" "$1"; }

iperf_listening() {
	nsx "$1" ss -Hltn "sport = :$2" | grep -q "$2"
}

# The iperf3 servers: on the LAN host (IPv4 through roved's forwarding)
# and in roved's namespace on all addresses (IPv6 to fd00:77::1).
bg iperf3-lan "$NS_LAN" iperf3 -s -B "$LAN_HOST" -p 5201
bg iperf3-srv "$NS_SRV" iperf3 -s -p 5202
wait_for 10 "iperf3 on the LAN host" iperf_listening "$NS_LAN" 5201 ||
	die "iperf3 server does not start"
wait_for 10 "iperf3 in roved's namespace" iperf_listening "$NS_SRV" 5202 ||
	die "iperf3 server does not start"

# iperf NAME DEST PORT [iperf3 options]: 3 s from the laptop; checks the
# exit status and that bytes arrived. $BYTES holds what was received.
iperf() {
	local name=$1 dest=$2 port=$3 rc=0 out=$WORK/$1.json
	shift 3
	nsx "$NS_LAP" timeout 30 iperf3 -c "$dest" -p "$port" -t 3 -J "$@" \
		>"$out" 2>"$WORK/$name.err" || rc=$?
	expect_eq "$name: iperf3 exit status" 0 "$rc"
	BYTES=$("$PY" -c '
import json, sys
e = json.load(open(sys.argv[1]))["end"]
s = e.get("sum_received") or e.get("sum")
print(int(s["bytes"]))' "$out" 2>/dev/null || echo 0)
	if [ "$BYTES" -gt 0 ]; then
		ok "$name: $BYTES bytes received"
	else
		fail "$name: nothing received"
	fi
}

# capture NS: tcpdump on NS's rove0 of IP packets longer than the MTU,
# i.e. super-packets (a TUN carries no link header: length = IP length).
capture() {
	bg "tcpdump-$1" "$1" tcpdump -i rove0 -nn -U -w "$WORK/cap-$1.pcap" \
		"greater $((MTU + 1))"
	CAP_PID=$BG_PID
	wait_for 10 "tcpdump listening in $1" \
		grep -q "listening on" "$WORK/tcpdump-$1.log" || die "tcpdump does not start"
}

# capture_count: stop the capture; $CAPTURED packets longer than the MTU.
capture_count() {
	stop_pid "$CAP_PID"
	forget_pid "$CAP_PID"
	CAPTURED=$(tcpdump -r "$WORK"/cap-*.pcap -nn 2>/dev/null | wc -l)
	rm -f "$WORK"/cap-*.pcap
}

# traffic MODE: TCP both ways over IPv4 and IPv6 with a capture on the
# receiving TUN each time, then UDP both ways.
traffic() {
	local mode=$1 dir ns dest port
	for dir in up down; do
		for fam in 4 6; do
			if [ "$fam" = 4 ]; then dest=$LAN_HOST port=5201; else dest=$SRV_TUN6 port=5202; fi
			# Upload: roved writes its TUN; download: the laptop does.
			if [ "$dir" = up ]; then ns=$NS_SRV; else ns=$NS_LAP; fi
			capture "$ns"
			if [ "$dir" = up ]; then
				iperf "$mode-tcp$fam-$dir" "$dest" "$port"
			else
				iperf "$mode-tcp$fam-$dir" "$dest" "$port" -R
			fi
			capture_count
			if [ "$mode" = auto ]; then
				if [ "$CAPTURED" -gt 0 ]; then
					ok "$mode-tcp$fam-$dir: $CAPTURED super-packets on the receiving TUN"
				else
					fail "$mode-tcp$fam-$dir: no super-packet on the receiving TUN"
				fi
			else
				expect_eq "$mode-tcp$fam-$dir: packets over the MTU on the receiving TUN" 0 "$CAPTURED"
			fi
		done
	done
	iperf "$mode-udp4-up" "$LAN_HOST" 5201 -u -b 200M -l 1200
	iperf "$mode-udp4-down" "$LAN_HOST" 5201 -u -b 200M -l 1200 -R
	iperf "$mode-udp6-up" "$SRV_TUN6" 5202 -u -b 200M -l 1200
}

# --- Offload = auto: everything this kernel offers.
start_pair auto
uso=$(uname -r | awk -F. '{ print ($1 > 6 || ($1 == 6 && $2 >= 2)) ? "true" : "false" }')
for who in srv lap; do
	if [ $who = srv ]; then g=srv_get; else g=lap_get; fi
	expect_eq "auto: $who checksum offload" true "$($g offload.csum)"
	expect_eq "auto: $who TSO" true "$($g offload.tso)"
	expect_eq "auto: $who USO (kernel $(uname -r))" "$uso" "$($g offload.uso)"
done
traffic auto
# The laptop split what its TCP handed the TUN, and wrote coalesced
# downloads; roved did the same the other way.
for who in srv lap; do
	if [ $who = srv ]; then g=srv_get; else g=lap_get; fi
	r=$($g offload.gso_read) w=$($g offload.gso_written)
	if [ "$r" -gt 0 ] && [ "$w" -gt 0 ]; then
		ok "auto: $who read $r and wrote $w super-packets"
	else
		fail "auto: $who read $r and wrote $w super-packets"
	fi
	expect_eq "auto: $who bad_offload drops" 0 "$($g drops.bad_offload)"
	expect_eq "auto: $who invalid_packet drops" 0 "$($g drops.invalid_packet)"
done
stop_pair

# --- Offload = off: one IP packet per read and write.
start_pair off
for who in srv lap; do
	if [ $who = srv ]; then g=srv_get; else g=lap_get; fi
	expect_eq "off: $who offloads" "false false false" \
		"$($g offload.csum) $($g offload.tso) $($g offload.uso)"
done
traffic off
for who in srv lap; do
	if [ $who = srv ]; then g=srv_get; else g=lap_get; fi
	expect_eq "off: $who super-packets read, written" "0 0" \
		"$($g offload.gso_read) $($g offload.gso_written)"
done
stop_pair

# --- EINVAL at run time: the laptop's first super-packet read and roved's
# first super-packet write fail; each turns its offloads off, once.
start_pair auto write read
iperf einval-tcp4-up "$LAN_HOST" 5201
iperf einval-tcp4-down "$LAN_HOST" 5201 -R
iperf einval-tcp6-up "$SRV_TUN6" 5202
expect_eq "einval: roved's log lines" 1 "$(grep -c 'writing failed with EINVAL; offloads turned off' "$SRV_LOG")"
expect_eq "einval: laptop's log lines" 1 "$(grep -c 'reading failed with EINVAL; offloads turned off' "$LAP_LOG")"
expect_eq "einval: other offload warnings" 0 "$(cat "$SRV_LOG" "$LAP_LOG" | grep -c 'EINVAL' | awk '{ print $1 - 2 }')"
for who in srv lap; do
	if [ $who = srv ]; then g=srv_get; else g=lap_get; fi
	expect_eq "einval: $who offloads now" "false false false" \
		"$($g offload.csum) $($g offload.tso) $($g offload.uso)"
done
expect_eq "einval: roved still established" established "$(srv_get 'peers[name=laptop].state')"
stop_pair
e2e_finish
