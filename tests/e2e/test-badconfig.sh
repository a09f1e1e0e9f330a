#!/usr/bin/env bash
# Bad configurations and failures during startup: roved and rove exit 1 with
# FILE:LINE: messages (every error, not just the first), and leave no TUN
# device behind, nor touch devices that are not theirs.
# e2e: light
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
topo_up
C=$WORK/configs

# run_prog NS PROG CONFIG [ARGS...]: PROG (roved or "rove up") bounded to
# 10 s; exit status in $RC, stderr in $ERR.
run_prog() {
	local ns=$1 prog=$2 conf=$3
	shift 3
	RC=0
	case $prog in
	roved) nsx "$ns" timeout 10 "$BUILD/roved" -f -c "$conf" "$@" >"$WORK/out" 2>"$WORK/err" || RC=$? ;;
	rove) nsx "$ns" timeout 10 "$BUILD/rove" up -f -c "$conf" "$@" >"$WORK/out" 2>"$WORK/err" || RC=$? ;;
	esac
	ERR=$(cat "$WORK/err")
}

# no_tun NS WHAT
no_tun() {
	if ip -n "$1" link show rove0 >/dev/null 2>&1; then
		fail "$2: rove0 left behind"
	else
		ok "$2: no rove0 left behind"
	fi
}

# line_of FILE REGEX: the number of the first line matching REGEX.
line_of() { grep -n -m1 "$2" "$1" | cut -d: -f1; }

# expect_err WHAT EXPECTED: stderr is exactly EXPECTED.
expect_err() {
	if [ "$ERR" = "$2" ]; then
		ok "$1: stderr is exactly the expected messages"
	else
		fail "$1: stderr differs"
		printf '    expected:\n%s\n    got:\n%s\n' "$(printf '%s\n' "$2" | sed 's/^/      /')" \
			"$(printf '%s\n' "$ERR" | sed 's/^/      /')"
	fi
}

# 1. roved: an MTU out of range and an unknown key, both reported.
b=$C/bad-mtu.conf
sed 's/^MTU = 1380$/MTU = 99999/; s/^\[Server\]$/[Server]\nBogus = 1/' "$C/roved.conf" >"$b"
lb=$(line_of "$b" '^Bogus = 1$')
lm=$(line_of "$b" '^MTU = 99999$')
if [ -z "$lb" ] || [ -z "$lm" ]; then die "could not generate $b"; fi
want="$b:$lb: unknown key 'Bogus' in [Server]
$b:$lm: MTU: 99999 is out of range (576..65535)"
for mode in run check; do
	if [ $mode = check ]; then run_prog "$NS_SRV" roved "$b" -n; else run_prog "$NS_SRV" roved "$b"; fi
	expect_eq "roved ($mode) with bad MTU and unknown key: exit status" 1 "$RC"
	expect_err "roved ($mode) with bad MTU and unknown key" "$want"
	no_tun "$NS_SRV" "roved ($mode) with bad MTU and unknown key"
done

# 2. rove: an unknown key and a bad route.
b=$C/bad-client.conf
sed 's/^Routes = .*/Routes = 198.19.10.0\/33, 198.19.10.0\/24/; s/^\[Client\]$/[Client]\nBogus = 2/' \
	"$C/rove.conf" >"$b"
lb=$(line_of "$b" '^Bogus = 2$')
lr=$(line_of "$b" '^Routes = ')
run_prog "$NS_LAP" rove "$b"
expect_eq "rove with an unknown key and a bad route: exit status" 1 "$RC"
case $ERR in
"$b:$lb: unknown key 'Bogus' in [Client]
$b:$lr: "*) ok "rove reports both errors with FILE:LINE" ;;
*) fail "rove: expected '$b:$lb: unknown key ...' then '$b:$lr: ...', got: $ERR" ;;
esac
no_tun "$NS_LAP" "rove with a bad config"

# 3. A private key that others can read.
cp "$C/keys/server.key" "$C/keys/open.key"
chmod 644 "$C/keys/open.key"
b=$C/open-key.conf
sed 's|^PrivateKeyFile = .*|PrivateKeyFile = keys/open.key|' "$C/roved.conf" >"$b"
run_prog "$NS_SRV" roved "$b"
expect_eq "roved with a mode 0644 key: exit status" 1 "$RC"
case $ERR in
*"$C/keys/open.key"*"(mode 0644)"*) ok "roved names the key file and its mode" ;;
*) fail "roved with a mode 0644 key: $ERR" ;;
esac
no_tun "$NS_SRV" "roved with a mode 0644 key"

# 4. A Listen address the host does not have: bind fails after the config
# was accepted.
b=$C/bad-listen.conf
sed 's|^Listen = .*|Listen = 198.18.1.77:4433|' "$C/roved.conf" >"$b"
run_prog "$NS_SRV" roved "$b"
expect_eq "roved with an unassignable Listen: exit status" 1 "$RC"
case $ERR in
*"198.18.1.77:4433"*) ok "roved names the address it cannot bind" ;;
*) fail "roved with an unassignable Listen: $ERR" ;;
esac
no_tun "$NS_SRV" "roved with an unassignable Listen"

# 5. A Tun name that belongs to an existing non-TUN device: refused, and the
# device is left alone.
b=$C/tun-eth0.conf
sed 's|^Tun = .*|Tun = eth0|' "$C/roved.conf" >"$b"
run_prog "$NS_SRV" roved "$b"
expect_eq "roved with Tun = eth0 (a veth): exit status" 1 "$RC"
case $ERR in
*eth0*) ok "roved names the device it cannot use" ;;
*) fail "roved with Tun = eth0: $ERR" ;;
esac
if ip -n "$NS_SRV" addr show dev eth0 2>/dev/null | grep -q "inet $SRV_OUTER/24"; then
	ok "eth0 and its address are untouched"
else
	fail "eth0 or its address $SRV_OUTER/24 is gone"
fi

# 6. The good config still starts after all that.
start_roved
expect_eq "roved with the example config: role" server "$(srv_get role)"
e2e_finish
