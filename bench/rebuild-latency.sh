#!/usr/bin/env bash
# What a rebuilt packet costs in latency: pings through the IP tunnel over
# a 44 ms round trip that loses 1% of packets each way at random, with
# LossRecovery = auto, then off, in one run. A ping whose request or reply
# the relay dropped and roved or rove rebuilt arrives late by the time its
# group waited for its repair (at most min(5 ms, RTT/4) plus a packet); one
# that could not be rebuilt is lost.
#
# usage: bench/rebuild-latency.sh BUILD_DIR [COUNT]
#   COUNT pings, 10 ms apart (default 3000: 30 s).
#
# Prints per setting: pings sent, lost, the median round trip, how many
# took more than 1 ms over it and by how much at most and at the 99th
# percentile of those, and the receivers' rebuilt counts.
. "$(dirname "$0")/../tests/e2e/roam-lib.sh"
TEST_NAME=bench-rebuild-latency
COUNT=${2:-3000}
roam_init "$1"
roam_topo_up 22 1
roam_configs

# run SETTING: COUNT pings with the laptop's LossRecovery at SETTING.
run() {
	client_key "$RCONF_C" LossRecovery "$1"
	roam_start_roved
	roam_start_client
	roam_wait_up || die "the tunnel does not come up"
	nsx "$RNS_C" ping -n -q -i 0.01 -c 200 "$S_TUN" >/dev/null 2>&1
	nsx "$RNS_C" ping -n -i 0.01 -c "$COUNT" "$S_TUN" >"$WORK/ping-$1.log" 2>&1
	"$PY" - "$1" "$WORK/ping-$1.log" "$COUNT" \
		"$(sgetp loss_recovery.rebuilt)" "$(cget loss_recovery.rebuilt)" <<'EOF'
import re, statistics, sys
setting, path, count, srv_rebuilt, lap_rebuilt = sys.argv[1:6]
rtts = [float(m.group(1)) for m in
        (re.search(r"time=([\d.]+) ms", l) for l in open(path)) if m]
med = statistics.median(rtts)
late = sorted(r - med for r in rtts if r - med > 1.0)
p99 = late[int(len(late) * 0.99) - 1] if late else 0.0
print("%-5s sent %s, lost %d, median %.2f ms; %d late by more than 1 ms: "
      "at most %.2f ms, p99 %.2f ms; rebuilt at roved %s, at rove %s"
      % (setting, count, int(count) - len(rtts), med, len(late),
         late[-1] if late else 0.0, p99, srv_rebuilt, lap_rebuilt))
EOF
	roam_stop_all
}

run auto
server_key "$RCONF_S" LossRecovery off
run off
