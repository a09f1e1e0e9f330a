#!/usr/bin/env bash
# Fault injection against a live roved, in rounds, while honest peers keep
# using it. SOAK_SECONDS (default 48, at least 36) makes rounds of 12 s;
# each round runs, for 9 s, at once:
#  - a half-open flood over TCP: 20 silent connections to ListenTCP from
#    each of 16 addresses, each one roved closes made again at once
#    (tests/e2e/tcp-silent.py);
#  - 500 idle connections to roved's MetricsListen from its own host;
#  - 300 silent connections to the laptop's SOCKS port (DynamicForward);
#  - 2,000 valid QUIC Initials at full rate (tests/e2e/quic-flood), and
#    2,000 garbage datagrams (tests/e2e/garbage.py), at roved's UDP port;
# then 3 s without them, after which roved's VmRSS and open descriptors
# (and the laptop rove's descriptors) are sampled.
# The honest side, all along: the laptop (QUIC) pings roved's tunnel
# address and the branch (TLS over TCP) the LAN host through roved, every
# 0.2 s; 2 s into each round's faults, 4 connections through the laptop's
# LocalForward and 2 through its SOCKS port each echo 64 KiB from the LAN
# host. Checks:
#  - every round's forwards complete with the echo's sha256 matching;
#  - after each round's faults, a metrics scrape answers and shows no TCP
#    handshake under way (the flood's slots all freed);
#  - each client loses at most 2% of its pings, and keeps its one session
#    (one handshake, established at the end);
#  - roved's VmRSS at the last round is at most max(10%, 2048 kB) above
#    the second round's (the first round sets up what stays for good:
#    heap arenas, the metrics server's buffers), and its descriptors at
#    most 4 more; the laptop's descriptors too;
#  - roved and the clients exit 0 on SIGTERM, with no sanitizer report.
# Topology: lib.sh's, plus $NS_ATK on the same link with 16 addresses of
# its own subnet, from which the floods come.
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
e2e_transport tcp
# The laptop on QUIC, the branch on TLS over TCP.
sed -i -e 's/^Transport = tcp$/Transport = quic/' "$WORK/configs/rove.conf"
FLOOD_TOOL=$BUILD/tests/quic-flood
# ASan keeps up to 256 MiB of freed memory resident by default, which
# would hide roved's own growth (as in flood-lib.sh).
if grep -q __asan_init "$BUILD/roved"; then
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4"
	log "sanitizer build: ASAN_OPTIONS=$ASAN_OPTIONS"
fi
[ -x "$FLOOD_TOOL" ] || die "$FLOOD_TOOL is missing; run make $(basename "$BUILD")/tests/quic-flood"
topo_up

SOAK_SECONDS=${SOAK_SECONDS:-48}
case $SOAK_SECONDS in
'' | *[!0-9]*) die "SOAK_SECONDS must be a whole number of seconds" ;;
esac
ROUND_S=12
ATTACK_S=9
ROUNDS=$((SOAK_SECONDS / ROUND_S))
[ "$ROUNDS" -ge 3 ] || ROUNDS=3
L_PORT=7001
SOCKS_PORT=1080
T_PORT=7101
M_PORT=9101
NS_ATK=rove-$$-atk
ATK_NET=198.19.201
SOURCES=()
for i in $(seq 10 25); do SOURCES+=("$ATK_NET.$i"); done

peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
client_add "$WORK/configs/rove.conf" "LocalForward = $L_PORT = $LAN_HOST:$T_PORT"
echo "MetricsListen = 127.0.0.1:$M_PORT" >"$WORK/m.line"
sed -i '/^\[Server\]/r '"$WORK/m.line" "$WORK/configs/roved.conf"

attacker_up "$NS_ATK" "${SOURCES[@]}"

# The Initials, built once (it takes a while) and sent every round.
INITIALS=$WORK/initials.bin
nsx "$NS_ATK" timeout 60 "$FLOOD_TOOL" -n 2000 -t 30 -o "$INITIALS" \
	"$SRV_OUTER:4433" >"$WORK/build.log" 2>&1 || {
	cat "$WORK/build.log"
	die "quic-flood could not build the Initials"
}

start_roved
start_client laptop "$WORK/configs/rove.conf" -D "127.0.0.1:$SOCKS_PORT"
start_client branch
wait_established laptop || die "laptop's tunnel does not come up"
wait_established branch || die "branch's tunnel does not come up over TCP"
expect_eq "roved: the branch's transport" tcp "$(srv_get 'peers[name=branch].transport')"
expect_eq "roved: the laptop's transport" quic "$(srv_get 'peers[name=laptop].transport')"
peer_bg target "$NS_LAN" serve "$LAN_HOST:$T_PORT" --echo
wait_listen "$NS_LAN" "$T_PORT" "the echo server"
wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"
wait_listen "$NS_LAP" "$SOCKS_PORT" "rove's DynamicForward"
wait_listen "$NS_SRV" "$M_PORT" "roved's metrics"

nfds() { local f=("/proc/$1/fd"/*); echo "${#f[@]}"; }
# scrape: roved's metrics, from its own host.
scrape() {
	nsx "$NS_SRV" timeout 10 "$PY" -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
		"http://127.0.0.1:$M_PORT/metrics"
}

# Pings for every round and 2 s more.
PINGS=$((ROUNDS * ROUND_S * 5))
bg ping-laptop "$NS_LAP" ping -n -i 0.2 -W 2 -c "$PINGS" "$SRV_TUN4"
PING_LAP=$BG_PID
bg ping-branch "$NS_BR" ping -n -i 0.2 -W 2 -c "$PINGS" "$LAN_HOST"
PING_BR=$BG_PID

RSS=() FDS=() LFDS=()
for ((r = 1; r <= ROUNDS; r++)); do
	t0=$SECONDS
	rm -f "$WORK"/*.stop "$WORK"/*.n "$WORK/tcp.json"
	bg "tcp-$r" "$NS_ATK" "$PY" "$E2E_DIR/tcp-silent.py" "$SRV_OUTER" 443 20 \
		"$ATTACK_S" "$WORK/tcp" "${SOURCES[@]}"
	pids=("$BG_PID")
	bg "metrics-$r" "$NS_SRV" "$PY" "$E2E_DIR/hold-conns.py" "$M_PORT" 500 \
		"$WORK/metrics" "$ATTACK_S"
	pids+=("$BG_PID")
	bg "socks-$r" "$NS_LAP" "$PY" "$E2E_DIR/hold-conns.py" "$SOCKS_PORT" 300 \
		"$WORK/socks" "$ATTACK_S"
	pids+=("$BG_PID")
	bg "initials-$r" "$NS_ATK" "$FLOOD_TOOL" -n 2000 -i "$INITIALS" -t "$ATTACK_S" \
		"$SRV_OUTER:4433"
	pids+=("$BG_PID")
	bg "garbage-$r" "$NS_ATK" timeout $((ATTACK_S + 5)) "$PY" "$E2E_DIR/garbage.py" \
		"$SRV_OUTER" 4433 2000 "$r" "$ATTACK_S"
	pids+=("$BG_PID")

	sleep 2
	out=$(peer_run "$NS_LAP" 20 many "127.0.0.1:$L_PORT" --conns 4 --size 65536 --timeout 15)
	if [ "$(jfield "$out" ok)" = 4 ] && [ "$(jfield "$out" bad)" = '[]' ]; then
		ok "round $r: 4 x 64 KiB echoed through the LocalForward during the faults"
	else
		fail "round $r: LocalForward during the faults: $out"
	fi
	out=$(peer_run "$NS_LAP" 20 many "127.0.0.1:$SOCKS_PORT" --socks "$LAN_HOST:$T_PORT" \
		--conns 2 --size 65536 --timeout 15)
	if [ "$(jfield "$out" ok)" = 2 ] && [ "$(jfield "$out" bad)" = '[]' ]; then
		ok "round $r: 2 x 64 KiB echoed through the SOCKS port during the faults"
	else
		fail "round $r: SOCKS forward during the faults: $out"
	fi

	while [ $((SECONDS - t0)) -lt "$ATTACK_S" ]; do sleep 0.5; done
	touch "$WORK/tcp.stop" "$WORK/metrics.stop" "$WORK/socks.stop"
	# They end by themselves (the flood writes its figures then).
	for ((i = 0; i < 50; i++)); do
		n=0
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done
		[ "$n" = 0 ] && break
		sleep 0.1
	done
	stop_pids "${pids[@]}"
	kill -0 "$ROVED_PID" 2>/dev/null || die "roved died in round $r"
	log "round $r: metrics connections $(cat "$WORK/metrics.n" 2>/dev/null)," \
		"SOCKS $(cat "$WORK/socks.n" 2>/dev/null), TCP flood $(cat "$WORK/tcp.json" 2>/dev/null)"
	if scrape | grep -q '^rove_handshakes_half_open_tcp 0$'; then
		ok "round $r: a metrics scrape answers after the faults, no TCP handshake under way"
	else
		fail "round $r: no metrics scrape after the faults, or TCP handshakes still under way"
	fi
	while [ $((SECONDS - t0)) -lt "$ROUND_S" ]; do sleep 0.5; done
	RSS+=("$(rss_kb "$ROVED_PID")")
	FDS+=("$(nfds "$ROVED_PID")")
	LFDS+=("$(nfds "$LAP_PID")")
	log "round $r: roved VmRSS ${RSS[-1]} kB, ${FDS[-1]} descriptors; laptop ${LFDS[-1]} descriptors"
	log "round $r: roved's admission: $(srv_get admission)"
done

# ping_result NAME PID: "SENT RECEIVED" once ping is done.
ping_result() {
	local i out
	for ((i = 0; i < 100; i++)); do
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	kill -INT "$2" 2>/dev/null
	stop_pids "$2"
	out=$(cat "$WORK/$1.log")
	printf '%s %s\n' \
		"$(printf '%s\n' "$out" | sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p')" \
		"$(printf '%s\n' "$out" | sed -n 's/.* \([0-9]*\) received.*/\1/p')"
}
for who in laptop:$PING_LAP branch:$PING_BR; do
	read -r tx rx < <(ping_result "ping-${who%%:*}" "${who#*:}")
	who=${who%%:*}
	: "${tx:=0}" "${rx:=0}"
	if [ "$tx" -gt 0 ] && [ $(((tx - rx) * 100)) -le $((tx * 2)) ]; then
		ok "$who: $rx of $tx pings answered during the faults (<= 2% lost)"
	else
		fail "$who: $rx of $tx pings answered during the faults (> 2% lost)"
	fi
done
for who in laptop branch; do
	expect_eq "$who kept its one session: handshakes" 1 "$(srv_get "peers[name=$who].handshakes")"
	expect_eq "$who is established" established "$(srv_get "peers[name=$who].state")"
done

log "roved VmRSS by round (kB): ${RSS[*]}; descriptors: ${FDS[*]}; laptop descriptors: ${LFDS[*]}"
base=${RSS[1]} last=${RSS[-1]}
slack=$((base / 10))
[ "$slack" -ge 2048 ] || slack=2048
if [ "$last" -le $((base + slack)) ]; then
	ok "roved's VmRSS flat: $last kB at the last round, $base kB at the second (<= +$slack)"
else
	fail "roved's VmRSS grows: $last kB at the last round, $base kB at the second (> +$slack)"
fi
if [ "${FDS[-1]}" -le $((FDS[1] + 4)) ]; then
	ok "roved's descriptors flat: ${FDS[-1]} at the last round, ${FDS[1]} at the second (<= +4)"
else
	fail "roved's descriptors grow: ${FDS[-1]} at the last round, ${FDS[1]} at the second (> +4)"
fi
if [ "${LFDS[-1]}" -le $((LFDS[1] + 4)) ]; then
	ok "the laptop's descriptors flat: ${LFDS[-1]} at the last round, ${LFDS[1]} at the second (<= +4)"
else
	fail "the laptop's descriptors grow: ${LFDS[-1]} at the last round, ${LFDS[1]} at the second (> +4)"
fi
fwd_finish laptop branch
