#!/usr/bin/env bash
# A TUN device made beforehand (ip tuntap add ... persistent): roved uses
# it, says so, carries the tunnel through it, and leaves it in place when
# it exits (it is its maker's), instead of adopting it silently.
# e2e: light
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
topo_up

ip -n "$NS_SRV" tuntap add dev rove0 mode tun || die "cannot make a persistent TUN device"
start_roved
start_client laptop
wait_established laptop || die "the laptop does not connect"
if grep -qF "roved: rove0: a persistent TUN device made beforehand (ip tuntap): used as it is, and left in place at exit" "$WORK/roved.log"; then
	ok "roved said it adopted the persistent rove0"
else
	fail "roved did not say it adopted rove0: $(head -n 5 "$WORK/roved.log")"
fi
check "pings through the persistent device" ping_ok "$NS_LAP" -c 5 -i 0.05 "$SRV_TUN4"
stop_pid "$LAP_PID"; forget_pid "$LAP_PID"
stop_pid "$ROVED_PID"; forget_pid "$ROVED_PID"
if ip -n "$NS_SRV" link show rove0 >/dev/null 2>&1; then
	ok "rove0 is still there after roved exits"
else
	fail "roved removed the persistent rove0 it did not make"
fi
e2e_finish
