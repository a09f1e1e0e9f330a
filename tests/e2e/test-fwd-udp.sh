#!/usr/bin/env bash
# e2e: light
# UDP LocalForwards (udp/) with a DNS server and client rove did not
# write: dnsmasq on the LAN host behind roved, dig in the laptop's
# namespace through `LocalForward = udp/5353`. 100 queries, each from its
# own source port (a flow each), all answered exactly; a second forward to
# a port AllowForward admits for TCP only is refused by roved's policy:
# dig times out, both sides count one refused flow, roved logs it.
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
for p in dnsmasq dig; do
	command -v "$p" >/dev/null || die "$p is not installed"
done
topo_up

DNS_PORT=5353
TCP_ONLY_PORT=5354
QUERIES=100
ANSWER=198.18.77.7

peer_set laptop AllowForward "udp/$LAN_HOST/32:$DNS_PORT, $LAN_HOST/32:$TCP_ONLY_PORT"
client_add "$WORK/configs/rove.conf" \
	"LocalForward = udp/$DNS_PORT = $LAN_HOST:$DNS_PORT" \
	"LocalForward = udp/$TCP_ONLY_PORT = $LAN_HOST:$TCP_ONLY_PORT"
bg dnsmasq "$NS_LAN" dnsmasq --no-daemon --conf-file=/dev/null --no-hosts \
	--no-resolv --listen-address="$LAN_HOST" --bind-interfaces \
	--port="$DNS_PORT" --address="/test.example/$ANSWER" \
	--pid-file="$WORK/dnsmasq.pid" --user=root
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
udp_bound() { [ -n "$(nsx "$1" ss -Hlun "sport = :$2")" ]; }
wait_for 10 "dnsmasq on udp $DNS_PORT" udp_bound "$NS_LAN" "$DNS_PORT" ||
	die "dnsmasq does not listen: $(cat "$WORK/dnsmasq.log")"
wait_for 10 "rove's udp/$DNS_PORT" udp_bound "$NS_LAP" "$DNS_PORT" ||
	die "rove does not bind udp/$DNS_PORT"

# Each query from a source port of its own (dig's random ones may meet
# again within a flow's idle time, and then share its flow): one flow each.
good=0 other=0
for ((i = 0; i < QUERIES; i++)); do
	out=$(nsx "$NS_LAP" timeout 5 dig @127.0.0.1 -p "$DNS_PORT" -b "127.0.0.1#$((41000 + i))" \
		+short +tries=1 +time=2 test.example 2>&1)
	if [ "$out" = "$ANSWER" ]; then
		good=$((good + 1))
	else
		other=$((other + 1))
		[ "$other" -le 3 ] && log "query $i: $out"
	fi
done
expect_eq "dig answers exactly $ANSWER through udp/$DNS_PORT" "$QUERIES" "$good"
expect_eq "roved's UDP flows opened" "$QUERIES" "$(srv_uc opened)"
expect_eq "rove's UDP flows opened" "$QUERIES" "$(lap_uc opened)"
expect_eq "roved's UDP flows refused (so far)" 0 "$(srv_uc refused)"
# Each flow listed in both statuses: its target, one datagram each way,
# the query's bytes out and the answer's back; rove names its source.
flows() {
	status "$1" "$2" | "$PY" -c '
import json, sys
want_src = sys.argv[2] == "src"
peers = json.load(sys.stdin)["peers"]
p = peers[0] if sys.argv[3] == "-" else [p for p in peers if p["name"] == sys.argv[3]][0]
f = p["udp_flows"]
ok = [x for x in f if x["target"] == sys.argv[1] and x["tx_datagrams"] == 1 and
      x["rx_datagrams"] == 1 and x["tx_bytes"] > 0 and x["rx_bytes"] > 0 and
      not x["refused"] and (x["source"].startswith("127.0.0.1:") == want_src)]
print(len(f), len(ok), len({x["source"] for x in ok}))' "$LAN_HOST:$DNS_PORT" "$3" "$4"
}
expect_eq "rove's flows listed: all, as expected, distinct sources" \
	"$QUERIES $QUERIES $QUERIES" "$(flows "$NS_LAP" "$LAP_SOCK" src -)"
expect_eq "roved's flows listed: all, as expected (no source)" \
	"$QUERIES $QUERIES 1" "$(flows "$NS_SRV" "$ROVED_SOCK" nosrc laptop)"
check "rove status names a flow" eval \
	'nsx "$NS_LAP" "$BUILD/rove" status -s "$LAP_SOCK" | grep -q "^    127.0.0.1:41000 -> $LAN_HOST:$DNS_PORT: "'

out=$(nsx "$NS_LAP" timeout 5 dig @127.0.0.1 -p "$TCP_ONLY_PORT" +short \
	+tries=1 +time=2 test.example 2>&1)
log "dig through udp/$TCP_ONLY_PORT (AllowForward for TCP only): $out"
case $out in
*"timed out"*) ok "dig through a TCP-only allowance times out" ;;
*) fail "dig through a TCP-only allowance answered: $out" ;;
esac
expect_eq "roved's UDP flows refused" 1 "$(srv_uc refused)"
wait_for 5 "rove counts the refusal" eval '[ "$(lap_uc refused)" = 1 ]' ||
	fail "rove's UDP flows refused: $(lap_uc refused)"
expect_eq "roved logs the refusal" 1 "$(grep -c "UDP forward to $LAN_HOST:$TCP_ONLY_PORT denied by AllowForward" "$WORK/roved.log")"
expect_eq "rove logs the refusal" 1 "$(grep -c "UDP flow to $LAN_HOST:$TCP_ONLY_PORT refused by the server: denied" "$WORK/laptop.log")"
fwd_finish
