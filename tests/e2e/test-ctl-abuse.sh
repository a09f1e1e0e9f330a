#!/usr/bin/env bash
# A configured peer that abuses its control stream: it asks for remote
# forwards without end and never reads the replies (its stream window is
# never widened). roved must close the connection with a protocol
# violation (application error 2), hold no more memory for it than a few
# megabytes, and keep serving the other peer, whose tunnel keeps working.
# e2e: light
. "$(dirname "$0")/lib.sh"
e2e_init "$@"
TOOL=$BUILD/tests/ctl-abuse
[ -x "$TOOL" ] || die "$TOOL is missing (make builds it with the tests)"
topo_up
start_roved
start_client branch
wait_established branch || die "the branch's tunnel does not come up"

rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$ROVED_PID/status"; }
rss0=$(rss)
key=$(cd "$WORK/configs" && readlink -f keys/laptop.key)
pub=$(sed -n 's/^ServerPublicKey = //p' "$WORK/configs/rove.conf")
rc=0
out=$(nsx "$NS_LAP" timeout 60 "$TOOL" -n 1000000 -t 30 "$key" "$pub" \
	"$SRV_OUTER:4433" 2>&1) || rc=$?
log "ctl-abuse: $out"
expect_eq "ctl-abuse exit status (0: roved closed the connection)" 0 "$rc"
case $out in
"closed by server: code 2 "*) ok "roved closed the abuser with a protocol violation" ;;
*) fail "roved did not close the abuser with code 2: $out" ;;
esac
rss1=$(rss)
log "roved VmRSS: $rss0 kB before, $rss1 kB after"
if [ $((rss1 - rss0)) -lt 8192 ]; then
	ok "roved grew by $((rss1 - rss0)) kB (< 8 MB)"
else
	fail "roved grew by $((rss1 - rss0)) kB"
fi
check "the branch still reaches the server" ping_ok "$NS_BR" -c 5 -i 0.05 "$SRV_TUN4"
e2e_finish
