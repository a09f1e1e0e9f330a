#!/usr/bin/env bash
# Dropping root: roved and rove started as root with User = nobody run as
# nobody/nogroup with no supplementary groups, both keeping CAP_NET_ADMIN
# only (rove for its routes and addresses, roved for the AllowedIPs routes
# a reload changes; its AllowRemoteForward ports are >= 1024), and
# empty bounding sets. Unprivileged, they still: carry pings both ways,
# answer rove status, migrate when the client's address changes (with a
# new socket whose buffers are forced past net.core.rmem_max), resume with
# 0-RTT after roved is killed and restarted (StateDir stays usable), and
# exit 0 on SIGTERM removing their control sockets. Then a peer allowed
# -R port 80 makes roved keep CAP_NET_BIND_SERVICE too, and the forward
# works.
# Last, roved refuses a StateDir owned by another user or a link to one.
# e2e: light
. "$(dirname "$0")/roam-lib.sh"
roam_init "$@"
roam_topo_up
roam_configs

NOBODY_UID=$(id -u nobody) || die "no user nobody"
NOBODY_GID=$(id -g nobody)
NOBODY_GROUP=$(id -gn nobody)
server_key "$RCONF_S" User nobody
client_key "$RCONF_C" User nobody
# The unprivileged processes must pass through the work directory to
# reach their StateDir and control socket.
chmod 711 "$WORK"

# proc_field PID FIELD: one line of /proc/PID/status, without its name.
proc_field() {
	awk -v f="$2:" '$1 == f { $1 = ""; sub(/^ +/, ""); print }' "/proc/$1/status"
}

# check_creds WHO PID CAPS: the ids, groups and capability sets of PID.
check_creds() {
	local who=$1 pid=$2 caps=$3 ids
	ids="$NOBODY_UID $NOBODY_UID $NOBODY_UID $NOBODY_UID"
	assert_eq "$who: real, effective, saved and fs uid" "$ids" "$(proc_field "$pid" Uid)"
	ids="$NOBODY_GID $NOBODY_GID $NOBODY_GID $NOBODY_GID"
	assert_eq "$who: real, effective, saved and fs gid" "$ids" "$(proc_field "$pid" Gid)"
	assert_eq "$who: supplementary groups" "" "$(proc_field "$pid" Groups)"
	assert_eq "$who: CapEff" "$caps" "$(proc_field "$pid" CapEff)"
	assert_eq "$who: CapPrm" "$caps" "$(proc_field "$pid" CapPrm)"
	assert_eq "$who: CapInh" 0000000000000000 "$(proc_field "$pid" CapInh)"
	assert_eq "$who: CapAmb" 0000000000000000 "$(proc_field "$pid" CapAmb)"
	assert_eq "$who: CapBnd" 0000000000000000 "$(proc_field "$pid" CapBnd)"
}

# dropped_line LOG CAPS: the one line saying what the process became.
dropped_line() {
	local want="dropped root: running as user nobody (uid $NOBODY_UID), group $NOBODY_GROUP (gid $NOBODY_GID), no supplementary groups; capabilities kept: $2"
	assert_eq "$(basename "$1" .log): lines saying it dropped root as expected" 1 \
		"$(grep -cF "$want" "$1")"
}

# owner PATH: "user:group" of PATH (not following a link).
owner() { stat -c %U:%G "$1" 2>/dev/null || echo missing; }

# udp_rcvbuf NS PID: the receive buffer (bytes) of each UDP socket of PID
# (ss prints a socket's memory on the line after the socket).
udp_rcvbuf() {
	nsx "$1" ss -Huanmp 2>/dev/null | awk -v p="pid=$2," '
		index($0, p) { want = 1; next }
		{
			if (want && match($0, /rb[0-9]+/))
				print substr($0, RSTART + 2, RLENGTH - 2)
			want = 0
		}'
}

roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up as nobody"

# 1. What each process became, and said it became.
check_creds roved "$ROVED_PID" 0000000000001000
check_creds rove "$LAP_PID" 0000000000001000
dropped_line "$WORK/roved.log" CAP_NET_ADMIN
dropped_line "$WORK/laptop.log" CAP_NET_ADMIN
assert_eq "roved's StateDir owner" "nobody:$NOBODY_GROUP" "$(owner "$ROVED_STATE")"
assert_eq "rove's StateDir owner" "nobody:$NOBODY_GROUP" "$(owner "$LAP_STATE")"
for f in reset.key ticket.key tickets; do
	assert_eq "roved's StateDir/$f owner" "nobody:$NOBODY_GROUP" "$(owner "$ROVED_STATE/$f")"
done
assert_eq "roved's control socket owner" "nobody:$NOBODY_GROUP" "$(owner "$ROVED_SOCK")"
assert_eq "rove's control socket owner" "nobody:$NOBODY_GROUP" "$(owner "$LAP_SOCK")"
assert_eq "the control sockets' directory owner" "nobody:$NOBODY_GROUP" \
	"$(owner "$(dirname "$ROVED_SOCK")")"
assert_eq "the directory above the StateDirs (root's, passable)" "root:root 711" \
	"$(stat -c '%U:%G %a' "$(dirname "$ROVED_STATE")")"

# 2. Traffic both ways, and status from both.
assert "client -> server $S_TUN through the tunnel" ping_ok "$RNS_C" -c 10 -i 0.05 "$S_TUN"
assert "server -> client $C_TUN through the tunnel" ping_ok "$RNS_S" -c 10 -i 0.05 "$C_TUN"
assert_eq "rove status --json against rove" client "$(status_try "$RNS_C" "$LAP_SOCK" | jget role)"
assert_eq "rove status --json against roved" server "$(status_try "$RNS_S" "$ROVED_SOCK" | jget role)"
# text_role NS SOCKET: the first word of plain rove status.
text_role() { nsx "$1" "$BUILD/rove" status -s "$2" | head -n 1 | cut -d: -f1; }
assert_eq "rove status (text) against roved" server "$(text_role "$RNS_S" "$ROVED_SOCK")"
assert_eq "rove status (text) against rove" client "$(text_role "$RNS_C" "$LAP_SOCK")"

# SO_RCVBUFFORCE doubles the 8 MiB asked for; without CAP_NET_ADMIN the
# kernel would stop at twice net.core.rmem_max.
RMEM_MAX=$(nsx "$RNS_C" sysctl -n net.core.rmem_max)
FORCED=$((2 * 8 * 1024 * 1024))
[ $((2 * RMEM_MAX)) -lt "$FORCED" ] || log "net.core.rmem_max $RMEM_MAX: the buffer check proves nothing here"
assert_eq "rove's UDP receive buffer (set up as root)" "$FORCED" "$(udp_rcvbuf "$RNS_C" "$LAP_PID")"

# 3. An address change (as in test-roam-addr): new address on link B, the
# old one deleted, the default route moved. The unprivileged client opens
# a new socket and migrates; it stays the same connection.
mig0=$(cget migrations)
roam_to_link_b || die "cannot move the client to link B"
if wait_for 10 "the client's path to leave from $C_B" client_local_is "$C_B"; then
	pass "the client's path now leaves from $C_B"
else
	failc "the client's path leaves from $(local_ip), not $C_B"
fi
assert_eq "client migrations" $((mig0 + 1)) "$(cget migrations)"
assert_eq "client handshakes after the migration" 1 "$(cget handshakes)"
assert_eq "client reconnects after the migration" 0 "$(cget reconnects)"
assert "client -> server after the migration" ping_ok "$RNS_C" -c 10 -i 0.05 "$S_TUN"
assert "server -> client after the migration" ping_ok "$RNS_S" -c 10 -i 0.05 "$C_TUN"
one_udp_socket() { [ "$(udp_rcvbuf "$RNS_C" "$LAP_PID" | wc -l)" = 1 ]; }
wait_for 5 "the old socket to close" one_udp_socket
assert_eq "rove's UDP receive buffer after the migration (forced, unprivileged)" \
	"$FORCED" "$(udp_rcvbuf "$RNS_C" "$LAP_PID")"
check_creds "rove after the migration" "$LAP_PID" 0000000000001000

# 4. roved killed and started again: its StateDir (reset key, ticket keys,
# register) still serves, so the client hears a stateless reset and
# resumes with 0-RTT, which the new roved accepts.
have_ticket() { compgen -G "$LAP_STATE/session-*" >/dev/null; }
wait_for 10 "the client's session ticket" have_ticket || failc "no session ticket in $LAP_STATE"
for f in "$LAP_STATE"/session-*; do
	assert_eq "the client's session ticket owner" "nobody:$NOBODY_GROUP" "$(owner "$f")"
done
roam_kill_roved
roam_start_roved
if wait_for 15 "the client's second handshake" client_hs_is 2; then
	pass "client reconnected to the new roved"
else
	failc "client did not reconnect (state $(cget state), handshakes $(cget handshakes))"
fi
assert_eq "client's stateless resets received" 1 "$(cget stateless_resets)"
assert_eq "client's 0-RTT attempts" 1 "$(cget zero_rtt.attempted)"
assert_eq "client's 0-RTT accepted" 1 "$(cget zero_rtt.accepted)"
assert_eq "new roved: connections with 0-RTT accepted" 1 "$(sgetp zero_rtt.accepted)"
check_creds "new roved" "$ROVED_PID" 0000000000001000
dropped_line "$WORK/roved.log" CAP_NET_ADMIN
for f in reset.key ticket.key tickets; do
	assert_eq "roved's StateDir/$f owner after the restart" "nobody:$NOBODY_GROUP" \
		"$(owner "$ROVED_STATE/$f")"
done
# The register: a header and 16,384 64-byte records, written in place by
# the new roved after it dropped root (the 0-RTT handshake spent a ticket
# and got a new one).
assert_eq "roved's ticket register size (bytes)" 1048640 "$(stat -c %s "$ROVED_STATE/tickets")"
assert "client -> server after the restart" ping_ok "$RNS_C" -c 10 -i 0.05 "$S_TUN"

# 5. SIGTERM: both exit 0 and remove their control sockets, unprivileged.
roam_stop_all close
assert_eq "roved's control socket after exit" missing "$(owner "$ROVED_SOCK")"
assert_eq "rove's control socket after exit" missing "$(owner "$LAP_SOCK")"
assert_eq "the client's TUN after exit" "" "$(ip -n "$RNS_C" -o link show type tun)"

# 6. A peer allowed -R port 80: roved keeps CAP_NET_BIND_SERVICE, and the
# client's RemoteForward on port 80 listens and carries data.
R_PORT=7002
awk '{ print } /^[[:space:]]*Name[[:space:]]*=[[:space:]]*laptop[[:space:]]*$/ {
	print "AllowRemoteForward = 80" }' "$RCONF_S" >"$RCONF_S.new" && mv "$RCONF_S.new" "$RCONF_S"
client_key "$RCONF_C" RemoteForward "80 = 127.0.0.1:$R_PORT"
mv "$WORK/laptop.log" "$WORK/laptop-1.log"
tool_bg rf-serve "$RNS_C" xfer-serve "127.0.0.1:$R_PORT" --timeout 60
wait_for 10 "the forward's target" ready_in "$WORK/rf-serve.log" || die "xfer-serve did not start"
roam_start_roved
roam_start_client
roam_wait_up || die "the tunnel does not come up with AllowRemoteForward = 80"
check_creds "roved allowing -R port 80" "$ROVED_PID" 0000000000001400
dropped_line "$WORK/roved.log" "CAP_NET_BIND_SERVICE, CAP_NET_ADMIN"
if wait_for 10 "roved's listener on port 80" tcp_port_open "$RNS_S" 80; then
	pass "roved (unprivileged) listens on port 80 for the laptop"
else
	failc "roved does not listen on port 80: $(grep 'remote forward' "$WORK/roved.log" | tail -n 2)"
fi
xfer=$(nsx "$RNS_S" "$PY" "$ROAM_TOOL" xfer-send 127.0.0.1:80 1M --timeout 20)
assert_eq "1 MB through the RemoteForward on port 80, sha256 equal" 1 "$(jf "$xfer" ok)"
roam_stop_all

# 7. A StateDir that another user owns, or a link in its place, stops
# roved at start with a message that says so, and is left as it was.
# (Bounded: a roved that did start would be stopped after 10 s.)
refused() {
	local what=$1 want=$2 out rc
	out=$(timeout -k 2 10 ip netns exec "$RNS_S" "$BUILD/roved" -f -c "$RCONF_S" 2>&1)
	rc=$?
	assert_eq "roved's exit status with $what" 1 "$rc"
	assert_eq "roved's message with $what" 1 "$(grep -cF "$want" <<<"$out")"
}
chown 12345:12345 "$ROVED_STATE"
refused "a StateDir of uid 12345" \
	"StateDir $ROVED_STATE: owned by uid 12345, not by root or uid $NOBODY_UID"
assert_eq "that StateDir's owner afterwards" 12345:12345 "$(stat -c %u:%g "$ROVED_STATE")"
mv "$ROVED_STATE" "$ROVED_STATE.real"
chown "$NOBODY_UID:$NOBODY_GID" "$ROVED_STATE.real"
ln -s "$ROVED_STATE.real" "$ROVED_STATE"
refused "a StateDir that is a symbolic link" "StateDir $ROVED_STATE: is a symbolic link"
roam_finish
