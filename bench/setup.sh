#!/usr/bin/env bash
# Set-up benchmark: how soon a forward carries its first message. From the
# moment `rove up` starts (roved already running) to the first 100-byte
# message echoed back through a LocalForward, over a 50 ms round trip
# (tests/e2e/delay-relay in the NAT router, 25 ms each way), on first
# contact (no session ticket) and on a reconnect with a ticket (0-RTT);
# and `ssh -L` measured the same way in the same run (sshd already
# running, ssh started at time zero).
#
# usage: bench/setup.sh BUILD_DIR [RUNS]     (RUNS: samples per row, 7)
# SETUP_KEX=hybrid|classic sets KeyExchange at both ends (default: the
# build's default), to set the post-quantum handshake against X25519.
#
# Topology: tests/e2e/roam-lib.sh; the echo server is on the LAN host
# behind roved, the client runs forward-only (Tun = none). The probe
# (tests/e2e/fwd-peer.py first, run by /usr/bin/python3) is started and
# trying to connect before the program under test starts, so an
# interpreter's start-up is not counted; it connects the moment the
# forward's listener exists, sends 100 bytes and waits for their echo.
# Time zero is taken just before the program is started.
. "$(dirname "$0")/../tests/e2e/roam-lib.sh"
# shellcheck source=bench/lib-ssh.sh
. "$(dirname "$0")/lib-ssh.sh"
TEST_NAME=bench-setup
RUNS=${2:-7}
roam_init "$1"
roam_report() { :; }
roam_topo_up 25
roam_configs
client_key "$RCONF_C" Tun none
if [ -n "${SETUP_KEX:-}" ]; then
	client_key "$RCONF_C" KeyExchange "$SETUP_KEX"
	server_key "$RCONF_S" KeyExchange "$SETUP_KEX"
fi
sed -i "/^Routes *=/d" "$RCONF_C"
SSH_PORT=22022
SSHL_PORT=7002
FWD=$E2E_DIR/fwd-peer.py

rtt=$(nsx "$RNS_C" ping -n -q -c 20 -i 0.05 "$S_OUT" | sed -n 's|.*= [0-9.]*/\([0-9.]*\)/.*|\1|p')
[ -n "$rtt" ] || die "cannot measure the round trip"
log "outer round trip: $rtt ms"

bg echo "$RNS_L" "$PY" "$FWD" serve "$LAN:$FWD_PORT" --echo --timeout 600
wait_for 10 "the echo server" tcp_port_open "$RNS_L" "$FWD_PORT" || die "no echo server"
roam_start_roved

# sshd in the server namespace, with keys made for this run only.
SSH_OK=0
ssh_setup() {
	[ -x /usr/sbin/sshd ] && command -v ssh >/dev/null || { log "openssh is not installed"; return 1; }
	sshd_start "$RNS_S" "$S_OUT" "$SSH_PORT" "$WORK/ssh" || return 1
	wait_for 10 "sshd" tcp_port_open "$RNS_S" "$SSH_PORT"
}
if ssh_setup; then SSH_OK=1; else log "no ssh row: $(tail -n 3 "$WORK/sshd.log" 2>/dev/null)"; fi
trap 'sshd_rundir_cleanup; roam_cleanup' EXIT

# sample NAME PORT CMD...: start the probe on PORT, then CMD in the client
# namespace at time zero; prints the milliseconds to the echo (or "fail").
sample() {
	local name=$1 port=$2 t0 res pid probe
	shift 2
	rm -f "$WORK/probe.ready"
	bg "probe-$name" "$RNS_C" "$PY" "$FWD" first "127.0.0.1:$port" --size 100 \
		--timeout 15 --ready-file "$WORK/probe.ready"
	probe=$BG_PID
	wait_for 10 "the probe" test -e "$WORK/probe.ready" || die "the probe does not start"
	t0=$(now_ns)
	bg "prog-$name" "$RNS_C" "$@"
	pid=$BG_PID
	wait_exit "$probe" 20
	res=$(tail -n 1 "$WORK/probe-$name.log")
	stop_pid "$pid" >/dev/null
	forget_pid "$pid"
	if [ "$(jf "$res" ok)" = 1 ]; then
		echo $((($(jf "$res" done_ns) - t0) / 1000000))
	else
		log "$name: $res" >&2
		echo fail
	fi
}

rove_up() { sample "$1" "$FWD_PORT" "$BUILD/rove" up -f -c "$RCONF_C"; }
ssh_up() {
	sample "$1" "$SSHL_PORT" ssh "${SSH_OPTS[@]}" \
		-L "127.0.0.1:$SSHL_PORT:$LAN:$FWD_PORT" "root@$S_OUT"
}
have_ticket() { compgen -G "$LAP_STATE/session-*" >/dev/null; }

FIRST=() TICKET=() SSH=()
for ((i = 1; i <= RUNS; i++)); do
	rm -f "$LAP_STATE"/session-*
	FIRST+=("$(rove_up "first-$i")")
	have_ticket || log "run $i: no ticket after the first contact"
	TICKET+=("$(rove_up "ticket-$i")")
	[ "$SSH_OK" = 1 ] && SSH+=("$(ssh_up "ssh-$i")")
	log "run $i: rove first contact ${FIRST[-1]} ms, with a ticket ${TICKET[-1]} ms, ssh -L ${SSH[-1]:--} ms"
done
zrtt=$(grep -c "0-RTT" "$WORK"/prog-ticket-*.log 2>/dev/null | awk -F: '{ s += $2 } END { print s + 0 }')

# row NAME SAMPLES...: the median, in ms and in round trips.
row() {
	local name=$1
	shift
	"$PY" - "$rtt" "$name" "$@" <<-'EOP'
	import statistics, sys
	rtt, name, v = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
	ok = sorted(int(x) for x in v if x != 'fail')
	if not ok:
	    print('| %s | - | - | - | %d failed |' % (name, len(v)))
	else:
	    m = statistics.median(ok)
	    print('| %s | %.0f | %.1f | %d-%d | %s |' % (name, m, m / rtt, ok[0], ok[-1],
	          ' '.join(v)))
	EOP
}
echo
echo "Set-up time to the first echoed 100-byte message through a -L forward,"
echo "round trip $rtt ms, $RUNS runs each (median; all samples in ms):"
echo
echo "| | median ms | RTTs | range ms | samples |"
echo "|---|---|---|---|---|"
row "rove, first contact" "${FIRST[@]}"
row "rove, with a ticket (0-RTT)" "${TICKET[@]}"
if [ "$SSH_OK" = 1 ]; then row "ssh -L" "${SSH[@]}"; else echo "| ssh -L | - | - | - | not measured |"; fi
echo
log "roved: forwards from 0-RTT $(sgetp forward_counters.opened_0rtt), opened $(sgetp forward_counters.opened)"
