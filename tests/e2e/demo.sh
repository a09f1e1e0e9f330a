#!/usr/bin/env bash
# make demo: a rove server and two clients in network namespaces on this
# machine, with traffic through the tunnel and the status both sides report.
#
# usage: tests/e2e/demo.sh BUILD_DIR   (as root)
. "$(dirname "$0")/lib.sh"
TEST_NAME=demo
e2e_init "$@"
command -v iperf3 >/dev/null || die "iperf3 is not installed (scripts/deps.sh installs it)"

if [ -t 1 ]; then BOLD=$(printf '\033[1m') PLAIN=$(printf '\033[0m'); else BOLD='' PLAIN=''; fi
heading() {
	printf '\n%s== %s%s\n' "$BOLD" "$*" "$PLAIN"
}

# run NS COMMAND...: show the command, then run it in namespace NS.
run() {
	local ns=$1 who
	shift
	case $ns in
	"$NS_SRV") who=server ;; "$NS_LAP") who=laptop ;; "$NS_BR") who=branch ;;
	"$NS_LAN") who=lan-host ;; "$NS_SITE") who=site-host ;; *) who=$ns ;;
	esac
	printf '%s$ %s\n' "$who" "$*" | sed "s|$BUILD/||g; s|$WORK/||g"
	nsx "$ns" "$@"
}

heading "Network: six namespaces on this machine"
cat <<EOF
  server    198.18.1.1   (roved, tunnel $SRV_TUN4 / $SRV_TUN6)
  laptop    198.18.1.2   (rove, configs/rove.conf: tunnel $LAP_TUN4)
  branch    198.18.1.3   (rove, configs/rove2.conf: a site 198.19.20.0/24 behind it)
  lan-host  198.19.10.2  (a LAN behind the server)
  site-host 198.19.20.2  (the branch's LAN)
  The three outer hosts share a bridge; rove traffic is UDP to 198.18.1.1:4433.
EOF
topo_up

heading "Start roved on the server and rove on both clients"
echo "server\$ roved -c configs/roved.conf"
start_roved
echo "laptop\$ rove up -c configs/rove.conf"
start_client laptop
echo "branch\$ rove up -c configs/rove2.conf"
start_client branch
wait_established laptop || die "the laptop's tunnel did not come up"
wait_established branch || die "the branch's tunnel did not come up"
BR_TUN4=$(sget "$NS_BR" "$BR_SOCK" 'address[0]')
BR_TUN4=${BR_TUN4%/*}
echo "both tunnels are up; the branch was given $BR_TUN4 from the pool"
echo
echo "what rove did on the laptop:"
run "$NS_LAP" ip -br addr show dev rove0
run "$NS_LAP" ip route show dev rove0

heading "Ping through the tunnel"
run "$NS_LAP" ping -n -c 3 -i 0.2 "$SRV_TUN4"
echo
run "$NS_LAP" ping -n -c 3 -i 0.2 "$SRV_TUN6"
echo
echo "laptop to the LAN behind the server:"
run "$NS_LAP" ping -n -c 3 -i 0.2 "$LAN_HOST"
echo
echo "site to site: the LAN host reaches the host behind the branch:"
run "$NS_LAN" ping -n -c 3 -i 0.2 "$SITE_HOST"

heading "TCP throughput through the tunnel: iperf3 for 5 s, laptop -> LAN host"
bg iperf3-server "$NS_LAN" iperf3 -s -1
iperf_listening() { nsx "$NS_LAN" ss -Hltn 'sport = :5201' | grep -q 5201; }
wait_for 10 "iperf3 listening" iperf_listening || die "iperf3 server does not start"
run "$NS_LAP" timeout 30 iperf3 -c "$LAN_HOST" -t 5 -f m || fail "iperf3 failed"

heading "rove status on the server"
run "$NS_SRV" "$BUILD/rove" status -s "$ROVED_SOCK"

heading "rove status on the laptop"
run "$NS_LAP" "$BUILD/rove" status -s "$LAP_SOCK"

heading "Machine-readable: rove status --json on the laptop"
echo "laptop\$ rove status -s configs/run/laptop.sock --json | python3 -m json.tool"
nsx "$NS_LAP" "$BUILD/rove" status -s "$LAP_SOCK" --json | "$PY" -m json.tool

heading "Clean up"
echo "stopping the clients and roved (SIGTERM), deleting the namespaces"
e2e_finish
