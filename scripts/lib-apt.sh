# shellcheck shell=bash
# Helpers shared by the scripts that fetch things from Debian's mirror
# without touching the host's apt configuration. Sourced, not run.
#
#   cache_root             where fetched and built dependencies are kept
#   private_apt DIR ARGS   apt-get with DIR's own sources.list and state

# The cache is per machine when run as root, so that every work tree and
# every user of the machine shares one download or build.
cache_root() {
	if [ -n "${ROVE_DEPS_CACHE:-}" ]; then
		printf '%s\n' "$ROVE_DEPS_CACHE"
	elif [ "$(id -u)" -eq 0 ]; then
		printf '/var/cache/rove-deps\n'
	else
		printf '%s/.cache/rove-deps\n' "${XDG_CACHE_HOME:-$HOME}"
	fi
}

# apt-get with a private source list, lists directory and cache, so the
# host's apt configuration and state are never read for sources nor written.
# The sandbox user stays root because the private directories are made by
# root with private modes that apt's usual _apt user could not enter; no
# lock is taken because nothing of the host's is being changed.
private_apt() {
	local dir=$1
	shift
	apt-get -o Dir::Etc::SourceList="$dir/sources.list" \
		-o Dir::Etc::SourceParts="$dir/sources.list.d" \
		-o Dir::State::Lists="$dir/lists" \
		-o Dir::Cache="$dir/cache" \
		-o APT::Sandbox::User=root \
		-o Debug::NoLocking=1 "$@"
}

# private_apt_cache DIR ARGS: apt-cache reading the same private state.
private_apt_cache() {
	local dir=$1
	shift
	apt-cache -o Dir::Etc::SourceList="$dir/sources.list" \
		-o Dir::Etc::SourceParts="$dir/sources.list.d" \
		-o Dir::State::Lists="$dir/lists" \
		-o Dir::Cache="$dir/cache" "$@"
}

# private_apt_dirs DIR: the directories private_apt expects under DIR; the
# caller writes DIR/sources.list.
private_apt_dirs() {
	mkdir -p "$1/sources.list.d" "$1/lists/partial" "$1/cache/archives/partial"
}
