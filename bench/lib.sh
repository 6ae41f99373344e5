# shellcheck shell=bash
# What the bench scripts share, sourced by each: where the repository is,
# temporary directories removed on exit (opening up the mode-0 work
# directories overlayfs leaves), background processes stopped on exit,
# the line that describes the machine, installing peers, and building the
# Go programs.

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

# install_pkg PKG...: installs Debian packages, as root only (a peer to
# compare against); 0 when installed. apt's output goes to $tmp/apt.log;
# the package lists are updated once, when a first try fails.
apt_updated=no
# shellcheck disable=SC2154 # tmp: set by the script
install_pkg() {
	[ "$uid" -eq 0 ] || return 1
	command -v apt-get >/dev/null || return 1
	if DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" >>"$tmp/apt.log" 2>&1; then
		return 0
	fi
	if [ "$apt_updated" = no ]; then
		apt_updated=yes
		apt-get update >>"$tmp/apt.log" 2>&1 || true
		DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" >>"$tmp/apt.log" 2>&1 && return 0
	fi
	return 1
}

# indir DIR CMD...: runs CMD in DIR.
indir() { (cd "$1" && shift && "$@"); }

# go_build DIR PKG...: builds each ./PKG of the repository into DIR/NAME
# (NAME = the last element of PKG), as one static binary each; moat with
# its entry point (-E=_rt0_moat, see internal/rt0), as the README builds it;
# MOAT_LDFLAGS replaces those linker flags (MOAT_LDFLAGS= links without it).
go_build() {
	local dir=$1 pkg
	shift
	if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
		PATH=/usr/local/go/bin:$PATH
	fi
	for pkg in "$@"; do
		local ldflags=
		[ "$pkg" = cmd/moat ] && ldflags=${MOAT_LDFLAGS--E=_rt0_moat}
		(cd "$repo" && CGO_ENABLED=0 go build -buildvcs=false -ldflags="$ldflags" -o "$dir/${pkg##*/}" "./$pkg")
	done
}

# The scripts that time variants in alternating rounds (startup.sh,
# workspace.sh) define the arrays names and labels, a function
# run_variant NAME N [ARGS...] that appends N samples (ms, one per line) to
# $tmp/NAME.samples, and the timer $timeit; failed collects the variants
# that failed.

# shellcheck disable=SC2154 # names, labels, tmp, timeit: set by the script
# run_round N [ARGS...]: N runs of every variant still in the race; a
# variant that fails has its output shown once and is left out after.
run_round() {
	local n=$1 i name
	shift
	for i in "${!names[@]}"; do
		name=${names[$i]}
		[ -e "$tmp/$name.failed" ] && continue
		if ! run_variant "$name" "$n" "$@" 2>"$tmp/$name.err"; then
			touch "$tmp/$name.failed"
			failed+=("$name")
			echo "-- ${labels[$i]} failed; leaving out its row:" >&2
			sed 's/^/   /' "$tmp/$name.err" >&2
		fi
	done
}

# collect_stats: med[NAME] and p90[NAME], in ms, for every variant that
# did not fail.
# shellcheck disable=SC2034,SC2154 # med, p90 read by the script; timeit set by it
collect_stats() {
	declare -gA med p90
	local name m p
	for name in "${names[@]}"; do
		[ -e "$tmp/$name.failed" ] && continue
		read -r m p _ _ < <("$timeit" -stats "$tmp/$name.samples")
		med[$name]=$m
		p90[$name]=$p
	done
}

# ratio A B: A/B to 2 decimals, or n/a when either is missing.
ratio() {
	if [ -n "${1:-}" ] && [ -n "${2:-}" ]; then awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; else printf 'n/a'; fi
}
