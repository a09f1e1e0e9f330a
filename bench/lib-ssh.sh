# shellcheck shell=bash
# A private sshd, the ssh -L baseline of the forwarding benchmarks
# (bench/forward.sh, bench/wan.sh, bench/setup.sh). Sourced after
# tests/e2e/lib.sh, whose bg and log it uses.
#
#   sshd_install       openssh-server and openssh-client from apt-get, if
#                      sshd is missing and this runs as root
#   sshd_start NS ADDR PORT DIR
#                      a host key, a client key DIR/id that sshd accepts
#                      for root, and a config in DIR; sshd on ADDR:PORT in
#                      NS, in the foreground, its PID in SSHD_PID. Returns
#                      non-zero if sshd is missing or the keys cannot be
#                      made; the caller waits for it to listen.
#   SSH_OPTS           ssh's options for that server (set by sshd_start):
#                      the client key, the port, no host key checks, no
#                      prompts, and an exit if the forward cannot be set up
#   sshd_rundir_cleanup
#                      removes /run/sshd if sshd_start made it

SSHD_RUNDIR_MADE=0

# Without sshd only the ssh row is missing, so a failed install is said
# and the benchmark goes on.
sshd_install() {
	[ ! -x /usr/sbin/sshd ] && [ "$(id -u)" -eq 0 ] || return 0
	log "installing openssh-server"
	apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends openssh-server openssh-client >/dev/null ||
		echo "bench: cannot install openssh-server; the ssh row will be missing" >&2
}

sshd_start() {
	local ns=$1 addr=$2 port=$3 d=$4
	[ -x /usr/sbin/sshd ] || { log "sshd is not installed"; return 1; }
	mkdir -p "$d" && chmod 700 "$d"
	# Keys for this run only, so that nothing of the host's ssh set-up
	# (its host keys, root's authorized_keys) is read or changed.
	ssh-keygen -q -t ed25519 -N '' -f "$d/host_key" || return 1
	ssh-keygen -q -t ed25519 -N '' -f "$d/id" || return 1
	cp "$d/id.pub" "$d/authorized_keys"
	# shellcheck disable=SC2034 # the callers pass it to ssh
	SSH_OPTS=(-N -F /dev/null -i "$d/id" -p "$port"
		-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
		-o BatchMode=yes -o ExitOnForwardFailure=yes)
	# sshd insists on its privilege separation directory.
	if [ ! -d /run/sshd ]; then
		mkdir -m 755 /run/sshd || return 1
		SSHD_RUNDIR_MADE=1
	fi
	cat >"$d/sshd_config" <<EOF
Port $port
ListenAddress $addr
HostKey $d/host_key
AuthorizedKeysFile $d/authorized_keys
PidFile none
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowTcpForwarding yes
X11Forwarding no
EOF
	bg sshd "$ns" /usr/sbin/sshd -D -e -f "$d/sshd_config"
	# shellcheck disable=SC2034 # bench/forward.sh measures its CPU
	SSHD_PID=$BG_PID
}

# A /run/sshd that was there before belongs to the host's own sshd.
# Returns 0 either way, so a trap that calls it keeps the exit status of
# what it cleans up after.
sshd_rundir_cleanup() {
	if [ "$SSHD_RUNDIR_MADE" = 1 ]; then rmdir /run/sshd 2>/dev/null || :; fi
	return 0
}
