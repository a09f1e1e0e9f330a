#!/usr/bin/env bash
# Scrapers that ask for a large scrape and never read it cannot keep
# others out of MetricsListen. roved has 3,000 peers (a scrape of some
# MiB); four scrapers send GET /metrics and read nothing, renewing their
# requests every 10 s, so that every scrape slot holds an answer stalled
# in a full socket. A scraper that reads still gets the whole scrape
# (200, ending with the process's figures), each time: a newcomer takes
# the slot of the scrape that has not moved for longest once it has been
# stalled a second, and roved counts it (rove_metrics_scrapes_total
# result="stalled"); no one is answered 503 meanwhile.
# Topology: tests/e2e/load-lib.sh (only roved's namespace is used).
. "$(dirname "$0")/load-lib.sh"
load_init "$@"
command -v curl >/dev/null || die "curl is not installed"
M_PORT=9101
load_topo_up
load_gen 3000
sed -i "s/^\[Server\]\$/[Server]\nMetricsListen = 127.0.0.1:$M_PORT/" "$LOAD_CONF"
load_start_roved

# scrape FILE: GET /metrics into FILE; prints the HTTP status.
scrape() {
	nsx "$NS_SRV" curl -s -o "$1" -w '%{http_code}' --max-time 10 \
		"http://127.0.0.1:$M_PORT/metrics"
}
# complete NAME FILE: FILE is a whole scrape (its last family is sent last).
complete() {
	if tail -n 1 "$2" | grep -q '^process_open_fds [0-9]*$'; then
		ok "$1: the whole scrape ($(stat -c %s "$2") bytes)"
	else
		fail "$1: the scrape is cut short: $(tail -c 80 "$2" | tail -n 1)"
	fi
}
# queued: "PEER SEND-Q" of each connection to the metrics port.
queued() {
	nsx "$NS_SRV" ss -Htn state established "sport = :$M_PORT" |
		awk '{ print $4, $2 }' | sort
}
# stalled: four connections to the metrics port, each with bytes queued
# that have not moved for 1.2 s (so their scrapes count as stalled).
stalled() {
	local a b
	a=$(queued)
	sleep 1.2
	b=$(queued)
	[ "$a" = "$b" ] && [ "$(printf '%s\n' "$a" | awk '$2 > 0' | wc -l)" = 4 ]
}
# wait_stalled WHAT: until stalled, 15 tries (about 20 s) at most.
wait_stalled() {
	local i
	for ((i = 0; i < 15; i++)); do
		stalled && return 0
	done
	fail "$1: the scrapes did not stall"
}
# figure FILE LINE-PREFIX: the value of that line of the scrape.
figure() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }

expect_eq "a scrape alone" 200 "$(scrape "$WORK/s0.prom")"
size=$(stat -c %s "$WORK/s0.prom")
[ "$size" -gt 4000000 ] || die "a scrape of $size bytes is too small to stall a socket"

bg holders "$NS_SRV" "$PY" "$E2E_DIR/hold-scrapes.py" "$M_PORT" 4 "$WORK/hold" 40 10
wait_for 10 "the stalled scrapers" test -s "$WORK/hold.n" || die "no stalled scrapers"
expect_eq "requests that read nothing" 4 "$(cat "$WORK/hold.n")"
# Their answers fill their sockets and stop; a second later they count
# as stalled.
wait_stalled "four scrapers"
for i in 1 2 3; do
	expect_eq "scrape $i during 4 stalled scrapers" 200 "$(scrape "$WORK/s$i.prom")"
	complete "scrape $i" "$WORK/s$i.prom"
	sleep 0.5
done
# The first took a stalled scraper's slot; the next two found it free.
expect_eq "scrapes cut off as stalled" 1 \
	"$(figure "$WORK/s3.prom" 'rove_metrics_scrapes_total{result="stalled"}')"
# The four renew their requests (at 10 s): all slots stalled again.
round2() { [ "$(cat "$WORK/hold.round")" = 2 ]; }
wait_for 15 "the stalled scrapers' second round" round2 ||
	fail "the stalled scrapers did not renew their requests"
wait_stalled "four scrapers, renewed"
expect_eq "scrape after the stalled scrapers renewed" 200 "$(scrape "$WORK/s4.prom")"
complete "scrape 4" "$WORK/s4.prom"
expect_eq "scrapes cut off as stalled" 2 \
	"$(figure "$WORK/s4.prom" 'rove_metrics_scrapes_total{result="stalled"}')"
expect_eq "scrapes answered 503" 0 \
	"$(figure "$WORK/s4.prom" 'rove_metrics_scrapes_total{result="busy"}')"
touch "$WORK/hold.stop"
check "roved still runs" kill -0 "$ROVED_PID"
e2e_finish
