#!/usr/bin/env bash
# TCP throughput through the tunnel: iperf3 for 10 s from the laptop to the
# LAN host behind the server.
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
command -v iperf3 >/dev/null || die "iperf3 is not installed (scripts/deps.sh installs it)"
topo_up
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"

iperf_listening() {
	nsx "$NS_LAN" ss -Hltn 'sport = :5201' | grep -q 5201
}

bg iperf3-server "$NS_LAN" iperf3 -s -1 -B "$LAN_HOST" -p 5201
wait_for 10 "iperf3 listening on the LAN host" iperf_listening ||
	die "iperf3 server does not start"

out=$WORK/iperf3.json
rc=0
nsx "$NS_LAP" timeout 40 iperf3 -c "$LAN_HOST" -p 5201 -t 10 -J >"$out" 2>"$WORK/iperf3-client.log" || rc=$?
expect_eq "iperf3 client exit status" 0 "$rc"
bps=$("$PY" -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]))' "$out" 2>/dev/null || echo 0)
retr=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_sent"].get("retransmits", "?"))' "$out" 2>/dev/null || echo '?')
log "laptop -> LAN host through the tunnel: $(awk -v b="$bps" 'BEGIN { printf "%.1f Mbit/s", b / 1e6 }') ($retr TCP retransmits)"
if [ "$bps" -gt 0 ]; then ok "received rate > 0"; else fail "received rate is $bps bit/s"; fi
status "$NS_SRV" "$ROVED_SOCK" >"$WORK/roved-status.json"
log "server drops: $(jget drops <"$WORK/roved-status.json"), datagrams_lost: $(jget 'peers[name=laptop].datagrams_lost' <"$WORK/roved-status.json")"
e2e_finish
