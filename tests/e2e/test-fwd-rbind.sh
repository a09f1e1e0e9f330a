#!/usr/bin/env bash
# Where roved listens for a RemoteForward (-R). Without a bind address on
# its loopback addresses only (127.0.0.1 and ::1), as ssh without
# GatewayPorts: reachable on the server itself, refused on its outer and
# LAN addresses. With a bind address only where the peer's
# AllowRemoteForward names it (ADDR:PORT, *:PORT); a port listed alone
# allows loopback, and a request for another address is denied with
# messages naming the address and AllowRemoteForward, in the logs and in
# both sides' status. A reload that narrows AllowRemoteForward closes a
# listener whose address it no longer allows.
# e2e: light
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
topo_up

T_PORT=7201   # the forwards' target: an echo server on the laptop

# 2222: loopback (the default); 2223 on the LAN address, allowed; 2224 on
# the outer address, allowed on loopback only; 2225 everywhere, given by
# -R on the command line; 2226 everywhere, allowed on loopback only.
peer_set laptop AllowRemoteForward "2222, $SRV_LAN:2223, 2224, *:2225, 2226"
client_add "$WORK/configs/rove.conf" \
	"RemoteForward = 2222 = 127.0.0.1:$T_PORT" \
	"RemoteForward = $SRV_LAN:2223 = 127.0.0.1:$T_PORT" \
	"RemoteForward = $SRV_OUTER:2224 = 127.0.0.1:$T_PORT" \
	"RemoteForward = *:2226 = 127.0.0.1:$T_PORT"
peer_bg echo "$NS_LAP" serve "127.0.0.1:$T_PORT" --echo
wait_listen "$NS_LAP" "$T_PORT" "the echo target"
start_roved
start_client laptop "$WORK/configs/rove.conf" -R "*:2225:127.0.0.1:$T_PORT"
wait_established laptop || die "laptop's tunnel does not come up"
LAP_KEY=$(nsx "$NS_LAP" "$BUILD/rove" pubkey <"$(conf_path "$WORK/configs/rove.conf" PrivateKeyFile)")

# listen_addrs NS PORT: the local addresses listening on TCP PORT, sorted.
listen_addrs() {
	nsx "$1" ss -Hltn "sport = :$2" | awk '{ print $4 }' | sort | xargs
}
# connect_result NS HOST PORT: "connected", "refused" or the error's name.
connect_result() {
	nsx "$1" "$PY" -c '
import errno, socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
    print("connected")
except ConnectionRefusedError:
    print("refused")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e)))
' "$2" "$3"
}

for p in 2222 2223 2225; do
	wait_listen "$NS_SRV" "$p" "roved's RemoteForward"
done
logged "$WORK/laptop.log" "remote forward on $SRV_OUTER:2224 refused by the server" \
	"the denied forward's answer arrived"

# --- 1. No bind address: the server's loopback addresses, nothing else.
expect_eq "port 2222: roved listens on loopback only" "127.0.0.1:2222 [::1]:2222" \
	"$(listen_addrs "$NS_SRV" 2222)"
transfer_ok "$NS_SRV" 127.0.0.1:2222 10000 "port 2222 on 127.0.0.1"
transfer_ok "$NS_SRV" "[::1]:2222" 10000 "port 2222 on ::1"
expect_eq "port 2222 on the outer address, from the laptop" refused \
	"$(connect_result "$NS_LAP" "$SRV_OUTER" 2222)"
expect_eq "port 2222 on the LAN address, from the LAN host" refused \
	"$(connect_result "$NS_LAN" "$SRV_LAN" 2222)"
logged "$WORK/roved.log" "peer laptop: remote forward listening on 127.0.0.1:2222 and [::1]:2222" \
	"roved's log names the loopback addresses"
logged "$WORK/laptop.log" "remote forward: the server listens on localhost:2222 for 127.0.0.1:$T_PORT" \
	"rove's log names the default bind"

# --- 2. An address AllowRemoteForward names: there, and only there.
expect_eq "port 2223: roved listens on the LAN address" "$SRV_LAN:2223" \
	"$(listen_addrs "$NS_SRV" 2223)"
transfer_ok "$NS_LAN" "$SRV_LAN:2223" 10000 "port 2223 on the LAN address"
expect_eq "port 2223 on loopback" refused "$(connect_result "$NS_SRV" 127.0.0.1 2223)"
logged "$WORK/roved.log" "peer laptop: remote forward listening on $SRV_LAN:2223" \
	"roved's log names the LAN address"

# --- 3. *:PORT from -R: every address, IPv4 and IPv6.
expect_eq "port 2225: roved listens on all addresses" "0.0.0.0:2225 [::]:2225" \
	"$(listen_addrs "$NS_SRV" 2225)"
transfer_ok "$NS_LAP" "$SRV_OUTER:2225" 10000 "port 2225 on the outer address"

# --- 4. An address the rules do not name: denied, and said so.
expect_eq "port 2224: nothing listens" "" "$(listen_addrs "$NS_SRV" 2224)"
expect_eq "port 2224 on the outer address" refused \
	"$(connect_result "$NS_LAP" "$SRV_OUTER" 2224)"
logged "$WORK/laptop.log" \
	"remote forward on $SRV_OUTER:2224 refused by the server: denied (not in its AllowRemoteForward for this client's key $LAP_KEY)" \
	"rove's denial names the address and the key"
logged "$WORK/roved.log" \
	"peer laptop: remote forward on $SRV_OUTER:2224 denied by AllowRemoteForward (port 2224 is listed, but not for this address: list $SRV_OUTER:2224, or *:2224 for any address)" \
	"roved's denial names the rule that would allow it"
expect_eq "port 2226 (*): nothing listens" "" "$(listen_addrs "$NS_SRV" 2226)"
logged "$WORK/roved.log" \
	"peer laptop: remote forward on *:2226 denied by AllowRemoteForward (port 2226 is listed, but not for all addresses: that takes *:2226)" \
	"roved's denial of all addresses names *:PORT"
logged "$WORK/laptop.log" \
	"remote forward on *:2226 refused by the server: denied (not in its AllowRemoteForward for this client's key $LAP_KEY)" \
	"rove's denial of all addresses"

# --- 5. Status, both sides.
T=$(text "$NS_LAP" "$LAP_SOCK")
has "rove status: the default" "$T" "    remote server localhost:2222 -> 127.0.0.1:$T_PORT: listening"
has "rove status: the LAN address" "$T" "    remote server $SRV_LAN:2223 -> 127.0.0.1:$T_PORT: listening"
has "rove status: the denied one" "$T" "    remote server $SRV_OUTER:2224 -> 127.0.0.1:$T_PORT: denied"
has "rove status: all addresses" "$T" "    remote server *:2225 -> 127.0.0.1:$T_PORT: listening"
T=$(text "$NS_SRV" "$ROVED_SOCK" --peer laptop)
has "roved status: the default" "$T" "    remote 127.0.0.1:2222 and [::1]:2222: listening"
has "roved status: the LAN address" "$T" "    remote $SRV_LAN:2223: listening"
has "roved status: all addresses" "$T" "    remote 0.0.0.0:2225 and [::]:2225: listening"
has "roved status: the denied one" "$T" "    remote $SRV_OUTER:2224: denied"
expect_eq "roved status JSON: the denied one's state" denied \
	"$(status "$NS_SRV" "$ROVED_SOCK" | "$PY" -c '
import json, sys
doc = json.load(sys.stdin)
p = [x for x in doc["peers"] if x.get("name") == "laptop"][0]
print(" ".join(l["state"] for l in p["listeners"] if l["bind"] == sys.argv[1]))
' "$SRV_OUTER:2224")"

# --- 6. A reload that lists port 2223 alone closes the LAN listener
# (loopback only now) and tells rove; the others stay.
peer_set laptop AllowRemoteForward "2222, 2223, 2224, *:2225, 2226"
kill -HUP "$ROVED_PID"
logged "$WORK/roved.log" \
	"reload: peer laptop: remote forward on $SRV_LAN:2223 closed: no longer in AllowRemoteForward" \
	"roved closed the LAN listener on reload"
logged "$WORK/laptop.log" "remote forward on $SRV_LAN:2223 refused by the server: denied" \
	"rove heard that the LAN forward is denied now"
expect_eq "port 2223 after the reload" "" "$(listen_addrs "$NS_SRV" 2223)"
expect_eq "port 2222 after the reload" "127.0.0.1:2222 [::1]:2222" \
	"$(listen_addrs "$NS_SRV" 2222)"
expect_eq "port 2225 after the reload" "0.0.0.0:2225 [::]:2225" \
	"$(listen_addrs "$NS_SRV" 2225)"
fwd_finish
