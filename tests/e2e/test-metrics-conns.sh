#!/usr/bin/env bash
# MetricsListen holds at most MetricsConnections (default 32) HTTP
# connections. 100 idle connections to it cost roved 32 descriptors: the
# other 68 are closed as they come, counted, and logged in one line;
# a scrape meanwhile is closed too (curl: empty reply, 000). Once the
# idle ones time out (10 s), roved is back to its descriptors before, a
# scrape succeeds, and its figures say 1 open (itself) and 69 refused.
# e2e: light
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
command -v curl >/dev/null || die "curl is not installed"
M_PORT=9101
CAP=32
IDLE=100
topo_up
echo "MetricsListen = 127.0.0.1:$M_PORT" >"$WORK/m.line"
sed -i '/^\[Server\]/r '"$WORK/m.line" "$WORK/configs/roved.conf"
start_roved

nfds() { ls "/proc/$1/fd" | wc -l; }
# scrape FILE: GET /metrics into FILE; prints the HTTP status (000: none).
scrape() {
	nsx "$NS_SRV" curl -s -o "$1" -w '%{http_code}' --max-time 5 \
		"http://127.0.0.1:$M_PORT/metrics"
}
figure() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }
refused_lines() { grep -c "MetricsListen: .* closed at once" "$WORK/roved.log"; }

expect_eq "a scrape before" 200 "$(scrape "$WORK/s0.prom")"
sleep 0.5
before=$(nfds "$ROVED_PID")
bg idle "$NS_SRV" "$PY" "$E2E_DIR/hold-conns.py" "$M_PORT" "$IDLE" "$WORK/idle" 30
wait_for 20 "the idle connections" test -s "$WORK/idle.n" || die "no idle connections"
expect_eq "idle connections made" "$IDLE" "$(cat "$WORK/idle.n")"
sleep 0.5
expect_eq "roved's descriptors with $IDLE idle connections" "$((before + CAP))" \
	"$(nfds "$ROVED_PID")"
expect_eq "a scrape while $CAP are open" 000 "$(scrape "$WORK/s1.prom")"
expect_eq "roved's log: lines about connections closed at once" 1 "$(refused_lines)"
# evhttp closes a connection with no request after 10 s.
wait_for 15 "the idle connections' timeout" test "$(nfds "$ROVED_PID")" -le "$before"
expect_eq "roved's descriptors after the idle ones timed out" "$before" \
	"$(nfds "$ROVED_PID")"
expect_eq "a scrape after" 200 "$(scrape "$WORK/s2.prom")"
expect_eq "connections open as it was made" 1 \
	"$(figure "$WORK/s2.prom" rove_metrics_connections_open)"
expect_eq "connections refused" $((IDLE - CAP + 1)) \
	"$(figure "$WORK/s2.prom" rove_metrics_connections_refused_total)"
expect_eq "roved's log: lines about connections closed at once" 1 "$(refused_lines)"
touch "$WORK/idle.stop"
e2e_finish
