#!/usr/bin/env bash
# bench/gvisor.sh: what --isolation gvisor costs, on this machine: the
# start-up of `moat run --isolation gvisor -- /bin/true` against the native
# backend and against `runsc do /bin/true` called directly, and a
# system-call-heavy command (find /usr > /dev/null) under each and bare;
# then sessions: create (and destroy) and exec latency of /bin/true in a
# live sandbox, gvisor against native, through the library
# (backendtest.BenchmarkLifecycle, the backends' BenchmarkLifecycle).
#
# Usage:  bench/gvisor.sh           (as root: runsc runs sandboxes for root only)
#         N=50 bench/gvisor.sh      (runs per variant; default 20)
# Needs Go to build moat, the timer and (once per machine) runsc
# (scripts/runsc.sh, cached).
#
# Each variant is timed by bench/timeit (fork to reap, monotonic clock)
# after 2 untimed runs, from a fresh workspace under /tmp owned by the
# sandbox user (runsc has no id-mapped mounts). The table gives the median
# and 90th percentile in ms. `runsc do` runs on an overlay of the host's
# root with no network, the closest runsc gets to moat's sandbox without a
# bundle; moat's gvisor run adds the bundle, its mounts and the default
# seccomp profile as runsc's filter.
set -euo pipefail
N=${N:-20}
case $N in '' | *[!0-9]*) echo "N must be a positive integer" >&2; exit 2 ;; esac
if [ "$(id -u)" -ne 0 ]; then
	echo "bench/gvisor.sh: run as root (runsc runs sandboxes for root only here)" >&2
	exit 2
fi

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tmp='' ws=''
newtmp tmp build
newtmp ws ws
chown 1000:1000 "$ws"

machine_line
go_build "$tmp" cmd/moat bench/timeit
runsc=$("$repo/scripts/runsc.sh")
moat=$tmp/moat timeit=$tmp/timeit
echo "== N=$N runs per variant; runsc $runsc"

row() { # row LABEL CMD...: median and p90 of N runs
	local label=$1 r
	shift
	if r=$(cd "$ws" && "$timeit" -warmup 2 -n "$N" -- "$@" 2>"$tmp/err"); then
		read -r med p90 _ <<<"$r"
		printf '%-44s %9s %9s\n' "$label" "$med" "$p90"
	else
		printf '%-44s %s\n' "$label" "failed: $(head -c 300 "$tmp/err")"
	fi
}

# gVisor cannot check the programs a command starts, so a policy with
# command rules is refused there: both backends run without them here.
norules=$tmp/norules.toml
printf '[harness]\nbuiltin = []\n' >"$norules"
printf '%-44s %9s %9s\n' "variant" "median" "p90"
row "moat run -- /bin/true (native)" "$moat" run --policy "$norules" -- /bin/true
row "moat run --isolation gvisor -- /bin/true" "$moat" run --policy "$norules" --isolation gvisor -- /bin/true
row "runsc do /bin/true" "$runsc" --network=none do /bin/true
find=(/bin/sh -c 'find /usr >/dev/null 2>&1; true')
row "find /usr (no sandbox)" "${find[@]}"
row "moat run -- find /usr (native)" "$moat" run --policy "$norules" -- "${find[@]}"
row "moat run --isolation gvisor -- find /usr" "$moat" run --policy "$norules" --isolation gvisor -- "${find[@]}"
row "runsc do find /usr" "$runsc" --network=none do "${find[@]}"

echo
echo "== sessions (backend.Lifecycle, N=$N each; create+destroy per iteration; exec of /bin/true)"
printf '%-44s %9s %9s\n' "variant" "median" "p90"
# lifecycle PKG NAME: the rows of the package's BenchmarkLifecycle.
lifecycle() {
	local out
	out=$(cd "$repo" && CGO_ENABLED=0 go test -run '^$' -bench 'BenchmarkLifecycle' -benchtime "${N}x" -count 1 "./$1" 2>&1 | grep -E '^BenchmarkLifecycle') || {
		printf '%-44s %s\n' "$2 session" "failed"
		return
	}
	for m in create destroy exec; do
		read -r med p90 < <(awk -v m="$m" '{for (i=1;i<=NF;i++) {if ($(i+1)==m"-p50-ms") a=$i; if ($(i+1)==m"-p90-ms") b=$i}} END {print a, b}' <<<"$out")
		printf '%-44s %9s %9s\n' "session $m ($2)" "$med" "$p90"
	done
}
lifecycle backend/native native
lifecycle backend/gvisor gvisor
