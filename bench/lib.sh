# shellcheck shell=bash
# What the bench scripts share, sourced by each: where the repository is,
# temporary directories removed on exit (opening up the mode-0 work
# directories overlayfs leaves), background processes stopped on exit,
# the line that describes the machine, and building the Go programs.

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
uid=$(id -u)
tmpdirs=()
pids=()

cleanup() {
	local p d
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	for d in "${tmpdirs[@]}"; do
		rm -rf -- "$d" 2>/dev/null || { chmod -R u+rwX -- "$d" 2>/dev/null; rm -rf -- "$d"; }
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# newtmp VAR NAME [PARENT]: VAR = a new directory under PARENT (default
# /tmp), removed on exit.
newtmp() {
	local d
	d=$(mktemp -d "${3:-/tmp}/moat-bench-$2.XXXXXX")
	tmpdirs+=("$d")
	printf -v "$1" '%s' "$d"
}

# machine_line prints what the numbers depend on.
machine_line() {
	echo "== machine: nproc=$(nproc) cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') kernel=$(uname -r) uid=$uid ($(id -un)) loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
}

# go_build DIR PKG...: builds each ./PKG of the repository into DIR/NAME
# (NAME = the last element of PKG), as one static binary each.
go_build() {
	local dir=$1 pkg
	shift
	if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
		PATH=/usr/local/go/bin:$PATH
	fi
	for pkg in "$@"; do
		(cd "$repo" && CGO_ENABLED=0 go build -buildvcs=false -o "$dir/${pkg##*/}" "./$pkg")
	done
}
