#!/bin/bash
# The layers of rove's code, checked from its includes (docs/ARCHITECTURE.md).
#
#   tests/check-layers.sh [ROOT]     check the tree at ROOT (default: .)
#   tests/check-layers.sh --self-test
#                                    plant a wrong include in a copy of the
#                                    tree and expect this check to name it
#
# Every quoted include names its folder ("transport/quic.h", "tun/tun.h")
# or none, and then means a header beside the includer. Each folder may
# include only the folders below it in the table that follows; a library
# is included only by the folders that own its use. Output: one line per
# slip, "file:line: folder may not include header", and a non-zero exit.
set -u

# folder: the folders its quoted includes may name (itself included).
declare -A MAY=(
	[base]="base"
	[wire]="base wire"
	[config]="base wire config"
	[transport]="base wire transport"
	[tun]="base wire tun"
	[forward]="base wire transport forward"
	[tunnel]="base wire transport tun tunnel"
	[ops]="base wire config transport forward tunnel ops"
	[daemon]="base wire config transport forward tunnel ops tun daemon"
	[client]="base wire config transport forward tunnel ops tun client"
)
# library header prefix: the folders that may include it.
declare -A LIB=(
	[ngtcp2/]="transport daemon"
	[netlink/]="tun"
	[cap-ng]="ops"
	[wolfssl/]="base transport"
	[isa-l]="tunnel"
)

allowed() {
	local want=$1 w
	shift
	for w in "$@"; do
		[[ $w == "$want" ]] && return 0
	done
	return 1
}

check_tree() {
	local root=$1 slips=0 file folder line num inc target
	cd "$root" || return 2
	local files=(common/*/*.[ch] tun/*.[ch] daemon/*.[ch] client/*.[ch])
	for file in "${files[@]}"; do
		[[ -f $file ]] || continue
		folder=${file%/*}
		folder=${folder#common/}
		if [[ -z ${MAY[$folder]+x} ]]; then
			echo "$file: folder $folder is not in the layer table"
			slips=$((slips + 1))
			continue
		fi
		# shellcheck disable=SC2206 # the table's words are folder names
		local may=(${MAY[$folder]})
		while IFS=: read -r num line; do
			if [[ $line =~ ^#include\ \"([^\"]+)\" ]]; then
				inc=${BASH_REMATCH[1]}
				target=""
				[[ $inc == */* ]] && target=${inc%%/*}
				if [[ -z $target ]]; then
					[[ -f ${file%/*}/$inc ]] && continue
					echo "$file:$num: $inc is not beside $file (name its folder)"
					slips=$((slips + 1))
				elif ! allowed "$target" "${may[@]}"; then
					echo "$file:$num: $folder may not include $inc"
					slips=$((slips + 1))
				fi
			elif [[ $line =~ ^#include\ \<([^\>]+)\> ]]; then
				inc=${BASH_REMATCH[1]}
				local lib
				for lib in "${!LIB[@]}"; do
					[[ $inc == "$lib"* ]] || continue
					# shellcheck disable=SC2086 # folder names
					allowed "$folder" ${LIB[$lib]} && continue
					echo "$file:$num: $folder may not include <$inc>"
					slips=$((slips + 1))
				done
			fi
		done < <(grep -n '^#include' "$file")
	done
	if ((slips > 0)); then
		echo "check-layers: $slips slip(s) (docs/ARCHITECTURE.md)"
		return 1
	fi
	echo "check-layers: ${#files[@]} files keep to their layers"
}

self_test() {
	local here out rc
	here=$(cd "$(dirname "$0")/.." && pwd)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$here" && tar cf - common tun daemon client) | (cd "$tmp" && tar xf -)
	# base reaching up for the transport, a bare header that is not
	# beside its includer, and netlink outside tun: each must be named,
	# with its line.
	sed -i '0,/^#include "/s//#include "transport\/quic.h"\n&/' \
	    "$tmp/common/base/log.c"
	printf '#include "cfg.h"\n' >>"$tmp/common/forward/fwd.c"
	printf '#include <netlink/netlink.h>\n' >>"$tmp/common/ops/status.c"
	out=$(check_tree "$tmp")
	rc=$?
	local line1 line2 line3
	line1=$(grep -n '^#include "transport/quic.h"' "$tmp/common/base/log.c" |
	    cut -d: -f1)
	line2=$(wc -l <"$tmp/common/forward/fwd.c")
	line3=$(wc -l <"$tmp/common/ops/status.c")
	local want
	want=$(printf '%s\n' \
	    "common/base/log.c:$line1: base may not include transport/quic.h" \
	    "common/forward/fwd.c:$line2: cfg.h is not beside common/forward/fwd.c (name its folder)" \
	    "common/ops/status.c:$line3: ops may not include <netlink/netlink.h>" \
	    "check-layers: 3 slip(s) (docs/ARCHITECTURE.md)")
	if ((rc != 1)) || [[ $out != "$want" ]]; then
		printf 'check-layers self-test FAILED (exit %d), got:\n%s\nwanted:\n%s\n' \
		    "$rc" "$out" "$want"
		return 1
	fi
	echo "check-layers self-test: a planted slip is named"
}

if [[ ${1-} == --self-test ]]; then
	self_test
else
	check_tree "${1:-.}"
fi
