#!/usr/bin/env bash
# Debugging a live tunnel: with KeyLogFile and QlogDir set on the laptop,
# a capture of its outer traffic decrypts in tshark with the key log, and
# shows the DATAGRAM frames of pings and the STREAM frames carrying a
# forward's data (a marker string found in the decrypted payload); each
# side writes a qlog file per connection, mode 0600, that parses as JSON
# text sequences; and the key log warning is in the log. roved, without
# the keys, writes neither file. The capture also shows the QUIC bit
# greased (RFC 9287).
# e2e: light
. "$(dirname "$0")/fwd-lib.sh"
fwd_init "$@"
command -v tshark >/dev/null || die "tshark is not installed (scripts/deps.sh installs it)"
command -v tcpdump >/dev/null || die "tcpdump is not installed"
topo_up
C=$WORK/configs
KEYLOG=$WORK/keys.log
QLOG=$WORK/qlog
mkdir -m 0700 "$QLOG"
chown nobody "$QLOG"   # the laptop runs as nobody once set up
L_PORT=7001; T_PORT=7101
peer_set laptop AllowForward "$LAN_HOST/32:$T_PORT"
client_add "$C/rove.conf" "KeyLogFile = $KEYLOG" "QlogDir = $QLOG" \
	"LocalForward = $L_PORT = $LAN_HOST:$T_PORT"
peer_bg echo "$NS_LAN" serve "$LAN_HOST:$T_PORT" --echo --results "$WORK/echo.json"
wait_listen "$NS_LAN" "$T_PORT" "the echo target"

# Immediate mode: libpcap would otherwise hand packets over in batches,
# and a SIGTERM drops whatever batch is still pending.
bg capture "$NS_LAP" tcpdump -i eth0 --immediate-mode -U -w "$WORK/outer.pcap" udp port 4433
cap_pid=$BG_PID
sleep 1
start_roved
start_client laptop
wait_established laptop || die "laptop's tunnel does not come up"
wait_listen "$NS_LAP" "$L_PORT" "rove's LocalForward"
check "laptop -> server" ping_ok "$NS_LAP" -c 5 -i 0.05 "$SRV_TUN4"
marker=ROVE-DEBUG-MARKER-$$
out=$(nsx "$NS_LAP" /usr/bin/python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(sys.argv[2].encode())
print(s.recv(100).decode())' "$L_PORT" "$marker")
expect_eq "the marker echoed through the forward" "$marker" "$out"
sleep 0.5
# The laptop first: its qlog is complete once its connection has closed.
stop_checked "$LAP_PID" laptop
sleep 0.5
stop_pid "$cap_pid"; forget_pid "$cap_pid"
grep -E 'packets (captured|received by filter)' "$WORK/capture.log" | tr '\n' ' ' | sed 's/^/capture: /'; echo

grep -q "KeyLogFile: the TLS secrets of every connection go to" "$WORK/laptop.log" &&
	ok "rove warned about the key log" || fail "rove did not warn about the key log"
expect_eq "key log mode" 600 "$(stat -c %a "$KEYLOG")"
expect_eq "key log lines naming the 1-RTT client secret" 1 \
	"$(grep -c '^CLIENT_TRAFFIC_SECRET_0 ' "$KEYLOG")"

tsk() {
	tshark -r "$WORK/outer.pcap" -o "tls.keylog_file:$KEYLOG" \
		-d udp.port==4433,quic "$@" 2>/dev/null
}
n=$(tsk -Y 'quic.frame_type == 0x30 || quic.frame_type == 0x31' | wc -l)
if [ "$n" -ge 10 ]; then
	ok "tshark decrypts $n packets with DATAGRAM frames (5 pings, both ways)"
else
	fail "tshark found $n packets with DATAGRAM frames (want >= 10)"
fi
hex=$(printf '%s' "$marker" | od -An -tx1 | tr -d ' \n')
n=$(tsk -Y "quic.stream_data contains $(printf '%s' "$hex" | sed 's/../&:/g; s/:$//')" | wc -l)
if [ "$n" -ge 2 ]; then
	ok "tshark finds the forward's data in $n decrypted STREAM frames"
else
	fail "tshark finds the forward's data in $n STREAM frames (want >= 2: out and echoed)"
fi

# RFC 9287: both ends advertise grease_quic_bit (transport parameter
# 0x2ab2), in the ClientHello (handshake type 1) and the server's
# EncryptedExtensions (8). Whether an end then clears the fixed bit of its
# short headers is ngtcp2's coin toss per connection, so the greased
# packets are counted, not required: when there are any, the pings and the
# forward above got through them.
hs=$(tsk -Y 'tls.quic.parameter.type == 0x2ab2' -T fields -e tls.handshake.type |
	tr ',' '\n' | grep -E '^(1|8)$' | sort -u | tr '\n' ' ')
expect_eq "handshake messages advertising grease_quic_bit (1 ClientHello, 8 EncryptedExtensions)" "1 8 " "$hs"
n=$(tsk -Y 'quic.header_form == 0 && quic.fixed_bit == 0' | wc -l)
echo "short-header packets with the QUIC bit greased to 0: $n"

files=("$QLOG"/client-*.sqlog)
expect_eq "qlog files of the laptop" 1 "${#files[@]}"
expect_eq "qlog mode" 600 "$(stat -c %a "${files[0]}")"
if /usr/bin/python3 - "${files[0]}" <<'PY'
import json, sys
# JSON text sequences (RFC 7464): records start with RS (0x1e).
recs = [r for r in open(sys.argv[1]).read().split("\x1e") if r.strip()]
head = json.loads(recs[0])
assert head["qlog_format"] == "JSON-SEQ", head
events = [json.loads(r) for r in recs[1:]]
names = {e["name"] for e in events}
assert "transport:packet_sent" in names and "transport:packet_received" in names, names
print(len(events), "events")
PY
then ok "the qlog parses, with packets sent and received"
else fail "the qlog does not parse as expected"
fi
expect_eq "server-side files written without QlogDir" 0 \
	"$(find "$QLOG" -name 'server-*' | wc -l)"
stop_checked "$ROVED_PID" roved
e2e_finish
