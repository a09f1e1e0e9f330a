#!/usr/bin/env bash
# Prometheus metrics: roved and the laptop serve /metrics on MetricsListen.
# After pings through the tunnel (and with nothing in flight), a scrape of
# each parses with prometheus_client's parser and every per-peer counter
# equals what `rove status --json` says at the same moment; other paths
# get 404 and other methods 405; an unset MetricsListen opens no port.
# e2e: light
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
/usr/bin/python3 -c 'import prometheus_client' 2>/dev/null ||
	die "python3-prometheus-client is not installed (scripts/deps.sh installs it)"
command -v curl >/dev/null || die "curl is not installed"
topo_up
C=$WORK/configs
echo "MetricsListen = 127.0.0.1:9101" >"$WORK/m.line"
sed -i '/^\[Server\]/r '"$WORK/m.line" "$C/roved.conf"
echo "MetricsListen = [::1]:9102" >>"$C/rove.conf"
start_roved
start_client laptop
start_client branch
wait_established laptop || die "laptop's tunnel does not come up"
wait_established branch || die "branch's tunnel does not come up"
check "laptop -> server" ping_ok "$NS_LAP" -c 20 -i 0.02 "$SRV_TUN4"

# scrape NS URL FILE: GET URL into FILE; prints the HTTP status.
scrape() { nsx "$1" curl -s -o "$3" -w '%{http_code}' --max-time 5 "$2"; }
compare() {
	local who=$1 ns=$2 sock=$3 url=$4
	expect_eq "$who: GET /metrics" 200 "$(scrape "$ns" "$url" "$WORK/$who.prom")"
	status "$ns" "$sock" >"$WORK/$who-status.json"
	if /usr/bin/python3 "$(dirname "$0")/metrics-check.py" "$WORK/$who.prom" \
		"$WORK/$who-status.json" >"$WORK/$who-check.log" 2>&1; then
		ok "$who: metrics parse and equal the status ($(grep -c '^ok' "$WORK/$who-check.log") checks)"
	else
		fail "$who: $(grep -v '^ok' "$WORK/$who-check.log" | head -5)"
	fi
}
compare roved "$NS_SRV" "$ROVED_SOCK" http://127.0.0.1:9101/metrics
compare laptop "$NS_LAP" "$LAP_SOCK" 'http://[::1]:9102/metrics'
expect_eq "laptop's rx packets in the scrape" 20 \
	"$(sed -n 's/^rove_peer_rx_packets_total{peer="server"} //p' "$WORK/laptop.prom")"
expect_eq "roved: GET /other" 404 "$(scrape "$NS_SRV" http://127.0.0.1:9101/other "$WORK/x")"
expect_eq "roved: POST /metrics" 405 \
	"$(nsx "$NS_SRV" curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST http://127.0.0.1:9101/metrics)"
expect_eq "branch (no MetricsListen) listens on TCP" "" "$(nsx "$NS_BR" ss -Hltn)"
e2e_finish
