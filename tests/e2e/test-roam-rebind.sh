#!/usr/bin/env bash
# NAT rebinding: the router forgets its mappings (conntrack -F) every second,
# 20 times, during a 50 MB transfer through a LocalForward and a ping every
# 10 ms through the tunnel. roved must follow the client to each new outer
# port by path validation, on the same connection.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up
roam_configs
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up"

tool_bg xfer-serve "$RNS_L" xfer-serve "$LAN:$FWD_PORT" --timeout 200
wait_for 10 "the transfer sink" ready_in "$WORK/xfer-serve.log" || die "xfer-serve did not start"
wait_for 10 "rove's LocalForward" tcp_port_open "$RNS_C" "$FWD_PORT" ||
	die "rove does not listen on 127.0.0.1:$FWD_PORT"

remote_before=$(sgetp remote)
log "roved sees the client at $remote_before"

# 24 s of pings at 10 ms, covering the 20 flushes.
ping_bg ping 24
tool_bg xfer "$RNS_C" xfer-send "127.0.0.1:$FWD_PORT" 50M --duration 20 --timeout 150
XFER_PID=$BG_PID
flushed=0
for ((i = 1; i <= 20; i++)); do
	sleep 1
	if nsx "$RNS_R" conntrack -F >/dev/null 2>&1; then
		flushed=$((flushed + 1))
	fi
done
assert_eq "conntrack flushes done" 20 "$flushed"

wait_exit "$XFER_PID" 150
xfer=$(tail -n 1 "$WORK/xfer.log")
log "transfer: $xfer"
assert_eq "50 MB through the LocalForward, sha256 equal" 1 "$(jf "$xfer" ok)"
wait_exit "$PING_PID" 40
gaps=$(tool gaps "$WORK/ping.log")
log "ping: $gaps"
assert_cmp "ping loss in percent" "$(jf "$gaps" loss_pct)" -le 2

assert_eq "roved's handshakes with the laptop" 1 "$(sgetp handshakes)"
assert_eq "client's handshakes" 1 "$(cget handshakes)"
assert_eq "client state" established "$(cget state)"
assert_eq "client reconnects" 0 "$(cget reconnects)"
rebinds=$(sgetp rebinds)
log "roved counted $rebinds rebinds, $(sgetp path_validations) path validations," \
	"$(sgetp path_validation_failures) failures, $(sgetp path_validations_aborted) superseded"
# Each flush gives the client a new random outer port, which roved must
# validate; a flush racing two packets of the flow can make two mappings,
# so there may be more rebinds than flushes, never fewer.
assert_cmp "roved's rebinds (one per flush at least)" "$rebinds" -ge 20
# A validation overtaken by the next rebinding is aborted, not failed:
# only a path that never answered counts as a failure.
assert_eq "roved's failed path validations" 0 "$(sgetp path_validation_failures)"
remote_after=$(sgetp remote)
if [ "$remote_after" != "$remote_before" ]; then
	pass "roved follows the client's new outer address ($remote_before -> $remote_after)"
else
	failc "roved still sends to $remote_before after 20 NAT flushes"
fi
roam_stop_all
roam_finish
