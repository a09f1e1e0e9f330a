#!/usr/bin/env bash
# Forward-only mode: rove with Tun = none, run as an unprivileged user
# (nobody, no groups, no capabilities) in the laptop namespace. Its
# LocalForward carries 20 MiB each way with equal sha256 at both ends, its
# namespace has no TUN device, and roved sees the peer established.
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
command -v setpriv >/dev/null || die "setpriv is not installed (util-linux)"
topo_up

USER_ID=$(id -u nobody) || die "no user nobody"
GROUP_ID=$(id -g nobody)
L_PORT=7001
T_PORT=7101
BYTES=$((20 * 1024 * 1024))

# The unprivileged rove's files: config, key (0600, its own), state and
# socket directories, all under a directory it owns. WORK must be
# traversable for it to get there.
U=$WORK/unpriv
chmod 711 "$WORK"
mkdir -p "$U/keys" "$U/state" "$U/run"
cp "$WORK/configs/keys/laptop.key" "$U/keys/laptop.key"
sed -e 's/^Tun = .*/Tun = none/' -e '/^Routes = /d' "$WORK/configs/rove.conf" >"$U/rove.conf"
client_add "$U/rove.conf" "LocalForward = $L_PORT = $LAN_HOST:$T_PORT"
chown -R "$USER_ID:$GROUP_ID" "$U"
chmod 700 "$U"
chmod 600 "$U/keys/laptop.key"
expect_eq "forward-only config" "Tun = none" "$(grep '^Tun' "$U/rove.conf")"

peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
peer_bg target "$NS_LAN" serve "$LAN_HOST:$T_PORT" --send "$BYTES" --results "$WORK/target.json"
wait_listen "$NS_LAN" "$T_PORT" "the target"
start_roved
bg laptop "$NS_LAP" setpriv --reuid="$USER_ID" --regid="$GROUP_ID" --clear-groups \
	--inh-caps=-all --bounding-set=-all "$BUILD/rove" up -f -c "$U/rove.conf" ${ROVE_VERBOSE:+-v}
LAP_PID=$BG_PID
LAP_SOCK=$U/run/laptop.sock
wait_established laptop || die "the unprivileged forward-only rove does not connect"

expect_eq "rove's real, effective, saved and fs uid" "$USER_ID $USER_ID $USER_ID $USER_ID" \
	"$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$LAP_PID/status")"
expect_eq "rove's supplementary groups" "" \
	"$(awk '/^Groups:/ { $1 = ""; sub(/^ */, ""); print }' "/proc/$LAP_PID/status")"
expect_eq "rove's effective capabilities" 0000000000000000 \
	"$(awk '/^CapEff:/ { print $2 }' "/proc/$LAP_PID/status")"
expect_eq "network devices in the laptop namespace" "eth0 lo" \
	"$(ip -n "$NS_LAP" -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | sort | xargs)"
expect_eq "TUN devices in the laptop namespace" "" "$(ip -n "$NS_LAP" -o link show type tun)"
wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"

out=$(peer_run "$NS_LAP" 120 connect "127.0.0.1:$L_PORT" --send "$BYTES" --timeout 100)
wait_for 20 "the target's result" has_lines "$WORK/target.json" 1 ||
	fail "the target reported nothing"
s=$(head -n1 "$WORK/target.json")
expect_eq "target received" "$BYTES" "$(jfield "$s" rx)"
expect_eq "client received" "$BYTES" "$(jfield "$out" rx)"
expect_eq "sha256 client -> target" "$(jfield "$out" tx_sha)" "$(jfield "$s" rx_sha)"
expect_eq "sha256 target -> client" "$(jfield "$s" tx_sha)" "$(jfield "$out" rx_sha)"
expect_eq "errors at both ends" "[] []" "$(jfield "$out" errors) $(jfield "$s" errors)"
wait_for 10 "roved's forwards list empties" srv_forwards_are 0 || fail "roved still lists forwards"
expect_eq "roved's forward counters" "1 1" "$(srv_fc opened) $(srv_fc completed)"
expect_eq "rove's forward counters" "1 1" "$(lap_fc opened) $(lap_fc completed)"

# A reload the user cannot read (root's own 0600 file) says why.
chown root:root "$U/rove.conf"
chmod 600 "$U/rove.conf"
kill -HUP "$LAP_PID"
if wait_for 10 "the reload's refusal" grep -qF "$U/rove.conf: Permission denied (read as uid $USER_ID: make the file readable by that user, e.g. chgrp and chmod 640)" "$WORK/laptop.log"; then
	ok "a reload denied its file says which uid reads it"
else
	fail "a reload denied its file: $(tail -n 3 "$WORK/laptop.log")"
fi
chown "$USER_ID:$GROUP_ID" "$U/rove.conf"

# Started as that user with a TUN device, or a StateDir it cannot make:
# each error says what to do.
sed -e 's/^Tun = none/Tun = rove0/' "$U/rove.conf" >"$U/tun.conf"
sed -e "s|^StateDir = .*|StateDir = $WORK/rootonly/state|" -e "/^LocalForward/d" \
	-e "s|^ControlSocket = .*|ControlSocket = $U/run/state.sock|" "$U/rove.conf" >"$U/state.conf"
mkdir -m 755 "$WORK/rootonly"
chown "$USER_ID:$GROUP_ID" "$U/tun.conf" "$U/state.conf"
# unpriv CONFIG: rove up as the user; its last line of error.
unpriv() {
	nsx "$NS_LAP" setpriv --reuid="$USER_ID" --regid="$GROUP_ID" --clear-groups \
		--inh-caps=-all --bounding-set=-all timeout 10 "$BUILD/rove" up -f -c "$1" 2>&1 |
		sed -n 's/^.*rove: error: //p' | tail -n 1
}
if [ "$(stat -c %a /dev/net/tun)" = 666 ]; then
	want="creating TUN device rove0: Operation not permitted (needs CAP_NET_ADMIN)"
else
	want="opening /dev/net/tun: Permission denied (a TUN device needs root, or CAP_NET_ADMIN and access to the device; Tun = none runs forwards only)"
fi
expect_eq "a TUN device without the rights: what to do" "$want" "$(unpriv "$U/tun.conf")"
# The StateDir is made when the first ticket comes.
bg state "$NS_LAP" setpriv --reuid="$USER_ID" --regid="$GROUP_ID" --clear-groups \
	--inh-caps=-all --bounding-set=-all "$BUILD/rove" up -f -c "$U/state.conf"
if wait_for 10 "the StateDir's error" grep -qF "StateDir $WORK/rootonly/state: Permission denied (as root, or a directory this user may create)" "$WORK/state.log"; then
	ok "a StateDir the user cannot make says what to do"
else
	fail "a StateDir the user cannot make: $(tail -n 3 "$WORK/state.log")"
fi
stop_pid "$BG_PID"; forget_pid "$BG_PID"

# The same forward without a file, as ssh -L takes one: rove up --server
# --server-key -L, the key from the user's usual place
# (~/.config/rove/private.key), the state under ~/.local/state.
stop_pid "$LAP_PID"; forget_pid "$LAP_PID"
mv "$WORK/laptop.log" "$WORK/laptop-file.log"
H=$U/home
mkdir -p "$H/.config/rove"
cp "$U/keys/laptop.key" "$H/.config/rove/private.key"
chown -R "$USER_ID:$GROUP_ID" "$H"
chmod 600 "$H/.config/rove/private.key"
SRV_KEY=$(sed -n 's/^ServerPublicKey = //p' "$U/rove.conf")
bg laptop "$NS_LAP" setpriv --reuid="$USER_ID" --regid="$GROUP_ID" --clear-groups \
	--inh-caps=-all --bounding-set=-all env HOME="$H" XDG_RUNTIME_DIR="$H/run" \
	"$BUILD/rove" up --server "$SRV_OUTER:4433" --server-key "$SRV_KEY" \
	-L "$L_PORT:$LAN_HOST:$T_PORT" ${ROVE_VERBOSE:+-v}
LAP_PID=$BG_PID
LAP_SOCK=$H/run/rove/rove.sock
wait_established laptop || die "rove up --server does not connect"
wait_listen "$NS_LAP" "$L_PORT" "rove up --server's -L"
# The target (still serving) answers each connection with BYTES.
out=$(peer_run "$NS_LAP" 120 connect "127.0.0.1:$L_PORT" --send 1048576 --timeout 100)
wait_for 20 "the target's second result" has_lines "$WORK/target.json" 2 ||
	fail "the target reported no second connection"
s=$(sed -n 2p "$WORK/target.json")
expect_eq "without a file: sha256 client -> target" "$(jfield "$out" tx_sha)" "$(jfield "$s" rx_sha)"
expect_eq "without a file: sha256 target -> client" "$(jfield "$s" tx_sha)" "$(jfield "$out" rx_sha)"
expect_eq "without a file: the session's state under the user's home" yes \
	"$([ -d "$H/.local/state/rove" ] && echo yes || echo no)"
fwd_finish
