#!/bin/sh
# The command lines of both programs, as a newcomer first meets them:
# --help and --version (standard output, exit 0), a wrong option (usage on
# standard error, exit 2), and rove genkey's key files.
#
# usage: tests/check-cli.sh BUILD_DIR
set -u

if [ $# -ne 1 ]; then
	echo "usage: $0 BUILD_DIR" >&2
	exit 2
fi
build=$(cd "$1" && pwd) || exit 2
version=$(head -1 "$(dirname "$0")/../debian/changelog" | cut -d' ' -f2 | tr -d '()')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; }

# expect NAME RC STDOUT_LINES STDERR_LINES COMMAND...: the command exits RC
# and prints that many lines on each stream.
expect() {
	local name=$1 rc=$2 out=$3 err=$4 got
	shift 4
	"$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	if [ "$got" -ne "$rc" ]; then
		fail "$name: exit $got, not $rc"
	elif [ "$(wc -l <"$tmp/out")" -ne "$out" ] || [ "$(wc -l <"$tmp/err")" -ne "$err" ]; then
		fail "$name: $(wc -l <"$tmp/out") lines out, $(wc -l <"$tmp/err") err (want $out, $err)"
	else
		pass "$name"
	fi
}

# has NAME FILE TEXT: FILE holds the line TEXT.
has() {
	if grep -qxF -- "$3" "$2"; then pass "$1"; else fail "$1: no line '$3' in: $(cat "$2")"; fi
}

expect "roved --version" 0 1 0 "$build/roved" --version
has "roved --version names it" "$tmp/out" "roved $version"
expect "rove --version" 0 1 0 "$build/rove" --version
has "rove --version names it" "$tmp/out" "rove $version"
# Every option of each program is described in --help.
expect "roved --help" 0 10 0 "$build/roved" --help
for o in -c -f -n -s -T -v; do
	if grep -q "^  $o " "$tmp/out"; then pass "roved --help describes $o"
	else fail "roved --help: $o not described"; fi
done
expect "rove --help" 0 36 0 "$build/rove" --help
for o in "-c FILE" "-f " "-n " "-s " "-T " "-v " "-L " "-R " "-D " "--server HOST" "-i KEYFILE" "-s SOCKET" "-j, --json" "--summary" "--peer NAME"; do
	if grep -q "^  $o" "$tmp/out"; then pass "rove --help describes $o"
	else fail "rove --help: $o not described"; fi
done
expect "roved -x" 2 0 3 "$build/roved" -x
expect "roved without -c" 2 0 2 "$build/roved"
expect "rove up --bogus" 2 0 9 "$build/rove" up --bogus
expect "rove nosuch" 2 0 8 "$build/rove" nosuch

# rove up without a file, as ssh -L: --server and --server-key make a
# forward-only configuration; -i names the key (relative: from here).
top=$(cd "$(dirname "$0")/.." && pwd)
key=$(sed -n 's/^ServerPublicKey = //p' "$top/configs/rove.conf")
(cd "$top/configs" && exec "$build/rove" up --server 198.18.1.1 --server-key "$key" \
	-i keys/laptop.key -L 8080:db:5432 -T) >"$tmp/out" 2>"$tmp/err"
for line in "Server = 198.18.1.1:4433" "ServerPublicKey = $key" \
	"PrivateKeyFile = $top/configs/keys/laptop.key" "Tun = none" \
	"LocalForward = 8080 = db:5432"; do
	has "rove up --server -T: $line" "$tmp/out" "$line"
done
expect "rove up --server without --server-key" 2 0 1 "$build/rove" up --server 198.18.1.1
has "rove up --server without --server-key says so" "$tmp/err" \
	"rove: --server needs --server-key (the server's public key)"
expect "rove up --server with -c" 2 0 1 "$build/rove" up -c x.conf --server 198.18.1.1 --server-key "$key"
expect "roved --server" 2 0 2 "$build/roved" --server 198.18.1.1
# A bad key is the configuration's error, named as the command line's.
expect "rove up --server with a bad key" 1 0 1 "$build/rove" up -n --server 198.18.1.1 --server-key nokey
has "rove up --server with a bad key: the message" "$tmp/err" \
	"command line:3: ServerPublicKey: 'nokey' is not a base64 32-byte key"

# genkey -o: 0600 whatever the umask, a key pubkey reads, an existing
# file kept.
(umask 022 && exec "$build/rove" genkey -o "$tmp/k") >"$tmp/out" 2>"$tmp/err"
if [ "$(stat -c %a "$tmp/k" 2>/dev/null)" = 600 ]; then pass "genkey -o: mode 600 under umask 022"
else fail "genkey -o: mode $(stat -c %a "$tmp/k" 2>&1)"; fi
expect "pubkey reads genkey -o's key" 0 1 0 sh -c "exec '$build/rove' pubkey <'$tmp/k'"
cp "$tmp/k" "$tmp/k.before"
expect "genkey -o on an existing file" 1 0 1 "$build/rove" genkey -o "$tmp/k"
has "genkey -o on an existing file says so" "$tmp/err" "rove: $tmp/k: File exists"
if cmp -s "$tmp/k" "$tmp/k.before"; then pass "genkey -o leaves an existing file"
else fail "genkey -o replaced an existing file"; fi
# genkey > FILE under umask 022: the key is written, with a warning.
(umask 022 && exec "$build/rove" genkey >"$tmp/k2") 2>"$tmp/err"
has "genkey > a 0644 file warns" "$tmp/err" \
	"rove: warning: the private key goes to a file others can read (mode 0644); rove refuses such a key: chmod 600 it, or use rove genkey -o FILE"
(umask 077 && exec "$build/rove" genkey >"$tmp/k3") 2>"$tmp/err"
if [ ! -s "$tmp/err" ] && [ -s "$tmp/k3" ]; then pass "genkey > a 0600 file: no warning"
else fail "genkey > a 0600 file: '$(cat "$tmp/err")'"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
