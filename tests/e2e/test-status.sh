#!/usr/bin/env bash
# rove status answers "is it working, and since when?": the latest
# handshake and the last packet received per peer, a peer never seen
# says so, a client's TUN before its first session is not called
# forward-only, the server's 0-RTT shows what it accepted, --peer with an
# unknown name fails, and plain `rove status` on a server host finds
# roved's socket. The TUN sends no multicast reports into the tunnel.
# e2e: light
. "$(dirname "$0")/lib.sh"
TEST_NAME=status
e2e_init "$@"
topo_up

# text NS SOCKET [ARGS...]: rove status as text.
text() {
	local ns=$1 sock=$2
	shift 2
	nsx "$ns" "$BUILD/rove" status -s "$sock" "$@"
}
# has WHAT TEXT PATTERN: TEXT has a line matching the extended regex.
has() {
	if printf '%s\n' "$2" | grep -qE -- "$3"; then ok "$1"
	else fail "$1: no line like '$3' in: $2"; fi
}

# The laptop's forwards: its listeners are listed, -R as the server
# answers it (2299 is not in its AllowRemoteForward).
printf '%s\n' "LocalForward = 127.0.0.1:7001 = $LAN_HOST:7101" "DynamicForward = localhost:1080" \
	"RemoteForward = 2299 = 127.0.0.1:22" >>"$WORK/configs/rove.conf"

# --- 1. The laptop before its server answers.
start_client laptop
wait_for 5 "the laptop's control socket" status_ok "$NS_LAP" "$LAP_SOCK" ||
	die "the laptop's rove does not answer"
T=$(text "$NS_LAP" "$LAP_SOCK")
has "before a session, the TUN is named and not forward-only" "$T" \
	"^client: interface rove0 \(not up yet: it comes with the server's configuration\)$"
has "before a session: latest handshake never" "$T" "^  latest handshake: never$"
has "listeners: -L" "$T" "^    local 127.0.0.1:7001 -> $LAN_HOST:7101: listening$"
has "listeners: -D (localhost)" "$T" "^    dynamic 127.0.0.1:1080: listening$"
has "listeners: -R before a session" "$T" "^    remote server localhost:2299 -> 127.0.0.1:22: waiting for a session$"

# --- 2. Connected: when, and the last packet.
t0=$(date +%s)
start_roved
wait_established laptop || die "the laptop does not connect"
t1=$(date +%s)
T=$(text "$NS_LAP" "$LAP_SOCK")
has "connected: the latest handshake's time and age" "$T" \
	"^  latest handshake: [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} \([0-9]+ s ago\)$"
has "connected: the last packet's age" "$T" "^  last packet received: [0-9]+\.[0-9] s ago$"
has "connected: the interface is up" "$T" "^client: interface rove0, mtu [0-9]+ "
wait_for 5 "the -R denial" grep -q "refused by the server: denied" "$WORK/laptop.log"
has "listeners: -R denied" "$(text "$NS_LAP" "$LAP_SOCK")" \
	"^    remote server localhost:2299 -> 127.0.0.1:22: denied$"
expect_eq "JSON: the -R listener's state" denied \
	"$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].listeners[2].state')"
hs=$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].latest_handshake')
if [ "$hs" -ge "$t0" ] && [ "$hs" -le "$t1" ]; then ok "JSON: latest_handshake $hs within the connect"
else fail "JSON: latest_handshake $hs not within $t0..$t1"; fi
idle=$(sget "$NS_LAP" "$LAP_SOCK" 'peers[0].last_received_ms_ago')
if [ "$idle" -ge 0 ] && [ "$idle" -lt 60000 ]; then ok "JSON: last_received_ms_ago $idle"
else fail "JSON: last_received_ms_ago '$idle'"; fi

# --- 3. roved: a peer never seen, and the 0-RTT it accepted.
T=$(text "$NS_SRV" "$ROVED_SOCK")
has "roved: a peer never seen says so" "$T" "^  state: closed \(never connected\)$"
has "roved: the laptop's 0-RTT as accepted counts" "$T" "0-RTT accepted 0 times$"
if printf '%s\n' "$T" | grep -q '0-RTT [0-9]*/[0-9]* accepted'; then
	fail "roved shows 0-RTT as accepted/attempted"
else
	ok "roved does not show attempts it cannot know"
fi
expect_eq "roved: the never-seen branch's JSON latest_handshake" 0 \
	"$(srv_get 'peers[name=branch].latest_handshake')"

# --- 3b. roved lists the -R ports it listens on for a peer.
printf '%s\n' "RemoteForward = 2222 = 127.0.0.1:22" >>"$WORK/configs/rove2.conf"
start_client branch
wait_established branch || die "the branch does not connect"
wait_for 10 "roved listening on 2222" bash -c "ip netns exec '$NS_SRV' ss -Hltn 'sport = :2222' | grep -q 2222"
T=$(text "$NS_SRV" "$ROVED_SOCK" --peer branch)
has "roved: the branch's -R listener" "$T" "^    remote 127\\.0\\.0\\.1:2222 and \\[::1\\]:2222: listening$"
has "roved: the laptop's -R it refused" "$(text "$NS_SRV" "$ROVED_SOCK" --peer laptop)" \
	"^    remote localhost:2299: denied$"

# --- 4. --peer.
if out=$(text "$NS_SRV" "$ROVED_SOCK" --peer laptop 2>&1); then
	ok "--peer laptop: exit 0"
else
	fail "--peer laptop: exit $?: $out"
fi
err=$(text "$NS_SRV" "$ROVED_SOCK" --peer nosuch 2>&1 >/dev/null)
rc=$?
expect_eq "--peer nosuch: exit 1" 1 "$rc"
expect_eq "--peer nosuch: says so" "rove: no peer named nosuch there (rove status lists them all)" "$err"
text "$NS_SRV" "$ROVED_SOCK" --peer nosuch --json >/dev/null 2>&1
expect_eq "--peer nosuch --json: exit 1" 1 "$?"

# --- 5. The kernel's own multicast on the TUNs (MLD, router
# solicitations) is not counted as packets without a route.
sleep 2
if ip -n "$NS_LAP" link show rove0 | grep -q MULTICAST; then
	fail "the laptop's TUN has multicast on: $(ip -n "$NS_LAP" link show rove0 | head -n 1)"
else
	ok "the laptop's TUN has multicast off"
fi
expect_eq "the laptop dropped nothing as no_route" 0 "$(sget "$NS_LAP" "$LAP_SOCK" drops.no_route)"
expect_eq "roved dropped nothing as no_route" 0 "$(srv_get drops.no_route)"

# --- 6. Plain `rove status` on a server host: roved with its default
# ControlSocket (/run/rove/roved.sock), in a mount namespace of its own
# with a fresh /run (and /etc/rove, if the host has one), so nothing of
# the host's is touched.
stop_pid "$LAP_PID"; forget_pid "$LAP_PID"
stop_pid "$ROVED_PID"; forget_pid "$ROVED_PID"
cp "$WORK/configs/roved.conf" "$WORK/configs/roved-default.conf"
sed -i '/^ControlSocket/d' "$WORK/configs/roved-default.conf"
bg roved-default "$NS_SRV" unshare --mount --propagation private sh -c \
	"mount -t tmpfs tmpfs /run && { [ ! -d /etc/rove ] || mount -t tmpfs tmpfs /etc/rove; } && exec '$BUILD/roved' -f -c '$WORK/configs/roved-default.conf'"
RD_PID=$BG_PID
in_roved_ns() { nsenter --target "$RD_PID" --mount --net "$@"; }
wait_for 10 "roved's default socket" in_roved_ns test -S /run/rove/roved.sock ||
	fail "roved did not create /run/rove/roved.sock: $(tail -n 3 "$WORK/roved-default.log")"
if out=$(in_roved_ns "$BUILD/rove" status 2>&1); then
	has "plain rove status on the server host" "$out" "^server: interface rove0"
else
	fail "plain rove status on the server host: $out"
fi
e2e_finish
