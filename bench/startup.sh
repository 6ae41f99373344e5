#!/usr/bin/env bash
# bench/startup.sh: start-up time and host memory of `moat run`, side by
# side with its peers, on this machine.
#
# Usage:  bench/startup.sh            (from any directory; root recommended)
#         N=500 bench/startup.sh      (runs per variant; default 200)
#         BENCH_USER=alice bench/startup.sh
#         ROUNDS=8 bench/startup.sh   (rounds the runs are split into; default 10)
# Needs Go (on PATH or in /usr/local/go/bin) to build moat and the timer.
#
# What it does:
#   1. Builds moat (CGO_ENABLED=0 go build -ldflags=-E=_rt0_moat ./cmd/moat) and the timer
#      bench/timeit into a temporary directory.
#   2. As root, installs a missing peer: bubblewrap (apt-get; `apt-get
#      update` once if the install fails). unshare comes from util-linux.
#      A peer that is missing and cannot be installed is reported and its
#      row left out; it never fails the script.
#   3. From inside a fresh workspace directory under /tmp (not $HOME), times
#      N runs of /bin/true under each variant:
#        /bin/true            no sandbox
#        unshare              unshare -Urmpn --fork /bin/true
#        bwrap                bwrap with the same setup as moat's default
#                             policy (read-only /usr and /etc, /bin etc. as
#                             on the host, workspace read-write, tmpfs /tmp,
#                             fresh /proc and /dev, every namespace,
#                             --cap-drop ALL). --tmpfs /tmp comes before
#                             the workspace bind, which a later tmpfs would
#                             hide. Unlike moat it puts no tmpfs on $HOME.
#        moat                 moat run -- /bin/true (default policy)
#      Each run is timed on its own by bench/timeit (fork to reap, monotonic
#      clock). The N runs are made in ROUNDS rounds (default 10) that
#      alternate between the variants, so a change of load on the machine
#      hits every variant alike. The table gives the median and the 90th
#      percentile, and each median over bwrap's.
#   4. Runs moat once more under ptrace (timeit -mem) and prints the peak
#      RSS (VmHWM, read when each process stops at its exit) of the moat
#      host process and the largest of its descendants that exec'd (the
#      init stage, or with the direct start, whose init shares the host's
#      memory and is counted with it, the command).
#      The rusage maxima (wait4, getrusage(RUSAGE_CHILDREN)) are printed as
#      a cross-check: the kernel folds reaped descendants into both, so
#      neither alone tells the host from init. Goal: each < 15 MiB.
#   5. As root, when the user BENCH_USER (default: moatci, if it exists) is
#      there, repeats the moat and bwrap rows and the memory line as that
#      user (setpriv --reuid/--regid --init-groups, binaries copied to a
#      world-readable directory, a workspace of the user's own, no
#      capabilities even in the bounding set, as .ci/asuser does): moat's
#      rootless path differs (no cgroup, no idmapped mounts).
#
# Numbers move with the load of the machine: the load average is printed
# first; compare runs made under similar load. Both moat binaries (root's
# and the user's copy) are timed with their pages read back from disk, as
# an installed binary's are after a reboot: the script drops them from the
# page cache first (dd iflag=nocache). That starts as go build's output
# does; a copy just written with cp or install starts 0.2-0.5 ms faster
# while its pages stay cached (write(2) leaves them in large folios; the
# linker's mmap writes, and pages read back from disk, are single pages),
# which would flatter moat. To tell two builds apart, copy both with cp
# and compare them with bench/abtime.
# Temporary directories are removed on exit.
set -euo pipefail

N=${N:-200}
ROUNDS=${ROUNDS:-10}
case $N in '' | *[!0-9]*) echo "N must be a positive integer" >&2; exit 2 ;; esac
case $ROUNDS in '' | *[!0-9]*) echo "ROUNDS must be a positive integer" >&2; exit 2 ;; esac
if [ "$N" -lt 1 ] || [ "$ROUNDS" -lt 1 ]; then
	echo "N and ROUNDS must be at least 1" >&2
	exit 2
fi
if [ "$ROUNDS" -gt "$N" ]; then ROUNDS=$N; fi

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

tmp='' ws='' ubin='' uws=''
newtmp tmp build
newtmp ws ws

machine_line
echo "== N=$N runs per variant in $ROUNDS rounds; workspace $ws"

# --- build -----------------------------------------------------------------
go_build "$tmp" cmd/moat bench/timeit
timeit=$tmp/timeit

# uncache FILE: drop FILE's pages from the page cache, so that they are
# read back from disk as an installed binary's are after a reboot (see
# above). A dd without nocache leaves them as they are, and says so.
uncache() {
	if ! dd of="$1" oflag=nocache conv=notrunc,fdatasync count=0 status=none 2>/dev/null ||
		! dd if="$1" iflag=nocache count=0 status=none 2>/dev/null; then
		echo "-- could not drop $1 from the page cache: it is timed with its pages cached, which flatters it" >&2
	fi
}

# --- peers -----------------------------------------------------------------
have() { # have CMD PKG: CMD is on PATH, installing PKG if need be
	command -v "$1" >/dev/null && return 0
	echo "-- $1 missing; installing $2" >&2
	if install_pkg "$2" && command -v "$1" >/dev/null; then
		return 0
	fi
	if [ "$uid" -eq 0 ]; then
		echo "-- could not install $2 (see below); leaving out its rows" >&2
		tail -n 3 "$tmp/apt.log" >&2 || true
	else
		echo "-- $1 missing and not root: leaving out its rows" >&2
	fi
	return 1
}
have_unshare=no
have_bwrap=no
have unshare util-linux && have_unshare=yes
have bwrap bubblewrap && have_bwrap=yes
echo "== moat $(git -C "$repo" describe --always --dirty 2>/dev/null || echo '(no git)'); $(go version | cut -d' ' -f3)$(
	[ "$have_bwrap" = yes ] && printf '; %s' "$(bwrap --version 2>/dev/null)")$(
	[ "$have_unshare" = yes ] && printf '; %s' "$(unshare --version 2>/dev/null)")"

# bwrap arguments mirroring moat's default root; /bin, /lib... are recreated
# as on the host (symlinks into /usr on a merged-/usr system).
bwrap_args() { # bwrap_args WS
	local d
	printf '%s\n' --ro-bind /usr /usr
	for d in bin lib lib32 lib64 libx32 sbin; do
		if [ -L "/$d" ]; then
			printf '%s\n' --symlink "$(readlink "/$d")" "/$d"
		elif [ -d "/$d" ]; then
			printf '%s\n' --ro-bind "/$d" "/$d"
		fi
	done
	# /tmp's tmpfs goes before the workspace bind: the workspace lives
	# under /tmp and a later tmpfs would hide it.
	printf '%s\n' --ro-bind /etc /etc --tmpfs /tmp --bind "$1" "$1" \
		--proc /proc --dev /dev --unshare-all --die-with-parent \
		--new-session --clearenv --cap-drop ALL --chdir "$1"
}

# --- the optional second user ------------------------------------------------
user=${BENCH_USER:-}
if [ -z "$user" ] && id moatci >/dev/null 2>&1; then user=moatci; fi
if [ -n "$user" ]; then
	if [ "$uid" -ne 0 ]; then
		echo "-- not root: skipping the rows as user $user" >&2
		user=
	elif ! id "$user" >/dev/null 2>&1; then
		echo "-- no user $user: skipping its rows" >&2
		user=
	elif ! command -v setpriv >/dev/null; then
		echo "-- setpriv missing: skipping the rows as user $user" >&2
		user=
	fi
fi
if [ -n "$user" ]; then
	newtmp ubin bin
	newtmp uws ws-user
	cp "$tmp/moat" "$tmp/timeit" "$ubin/"
	chmod 755 "$ubin" "$ubin/moat" "$ubin/timeit"
	uncache "$ubin/moat"
	chown "$user:$(id -gn "$user")" "$uws"
	uhome=$(getent passwd "$user" | cut -d: -f6)
	# as an ordinary login of the user would be (and as .ci/asuser runs tests)
	asuser=(setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups
		--inh-caps=-all --bounding-set=-all env HOME="$uhome" USER="$user" LOGNAME="$user")
fi

uncache "$tmp/moat" # after the copy above, which read it

# --- variants ----------------------------------------------------------------
# Each variant is a name, a label and a command run from its workspace.
names=() labels=()
add() { names+=("$1"); labels+=("$2"); }
add true "/bin/true (no sandbox)"
[ "$have_unshare" = yes ] && add unshare "unshare -Urmpn --fork"
[ "$have_bwrap" = yes ] && add bwrap "bwrap"
add moat "moat run"
if [ -n "$user" ]; then
	[ "$have_bwrap" = yes ] && add bwrap_user "bwrap (as $user)"
	add moat_user "moat run (as $user)"
fi

# run_variant NAME RUNS: append RUNS times (ms), one per line, to NAME's file
run_variant() {
	local n=$2 out=$tmp/$1.samples
	local -a cmd
	case $1 in
	true) cmd=(/bin/true) ;;
	unshare) cmd=(unshare -Urmpn --fork /bin/true) ;;
	bwrap) mapfile -t cmd < <(bwrap_args "$ws"); cmd=(bwrap "${cmd[@]}" /bin/true) ;;
	moat) cmd=("$tmp/moat" run -- /bin/true) ;;
	bwrap_user) mapfile -t cmd < <(bwrap_args "$uws"); cmd=(bwrap "${cmd[@]}" /bin/true) ;;
	moat_user) cmd=("$ubin/moat" run -- /bin/true) ;;
	esac
	case $1 in
	*_user) indir "$uws" timeout "$((60 + n))" "${asuser[@]}" "$ubin/timeit" -raw -warmup 3 -n "$n" -- "${cmd[@]}" >>"$out" ;;
	*) indir "$ws" timeout "$((60 + n))" "$timeit" -raw -warmup 3 -n "$n" -- "${cmd[@]}" >>"$out" ;;
	esac
}

failed=()
for ((r = 0; r < ROUNDS; r++)); do
	run_round "$((N / ROUNDS + (r < N % ROUNDS ? 1 : 0)))"
done

# --- table ---------------------------------------------------------------------
collect_stats

echo
printf '%-28s | %9s | %8s | %s\n' variant "median ms" "p90 ms" "ratio to bwrap"
printf '%-28s-|-%9s-|-%8s-|-%s\n' ---------------------------- --------- -------- --------------
for i in "${!names[@]}"; do
	name=${names[$i]}
	[ -n "${med[$name]:-}" ] || continue
	printf '%-28s | %9.2f | %8.2f | %s\n' "${labels[$i]}" "${med[$name]}" "${p90[$name]}" "$(ratio "${med[$name]}" "${med[bwrap]:-}")"
done
echo
if [ -n "${med[moat]:-}" ] && [ -n "${med[bwrap]:-}" ]; then
	echo "moat/bwrap = $(ratio "${med[moat]}" "${med[bwrap]}") (goal <= 1.0)"
else
	echo "moat/bwrap = n/a (a row is missing) (goal <= 1.0)"
fi
if [ -n "${med[moat_user]:-}" ] && [ -n "${med[bwrap_user]:-}" ]; then
	echo "moat/bwrap as $user = $(ratio "${med[moat_user]}" "${med[bwrap_user]}") (goal <= 1.0)"
fi

# --- memory --------------------------------------------------------------------
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
memline() { # memline LABEL -- TIMEIT-MEM-COMMAND...
	local label=$1 out line k v
	shift
	if ! out=$("$@" 2>&1); then
		echo "memory ($label): measurement failed: $out"
		return
	fi
	local -A m=()
	while IFS= read -r line; do
		k=${line%%=*} v=${line#*=}
		m[$k]=$v
	done <<<"$out"
	local goal=met
	if [ "${m[host_kib]:-0}" -ge $((15 * 1024)) ] || [ "${m[descendants_max_kib]:-0}" -ge $((15 * 1024)) ]; then
		goal="NOT met"
	fi
	# With the direct start, init (and its helpers) never exec and share
	# the host's memory: they show as no-exec-child and count with the
	# host; the largest descendant is then the command itself.
	local what="largest of its descendants (${m[descendants_max_name]:-?}; the direct start's init shares the host's memory)"
	if [ "${m[descendants_max_name]:-}" = moat-sandbox-init ]; then
		what="init stage (moat-sandbox-init, the largest of its descendants)"
	fi
	echo "memory ($label): moat host process $(mib "${m[host_kib]:-0}"); $what $(mib "${m[descendants_max_kib]:-0}"); goal < 15 MiB each: $goal"
	echo "  the host process at its exit: $(mib "${m[host_anon_kib]:-0}") private (RssAnon), $(mib "${m[host_file_kib]:-0}") mapped from files (RssFile: the binary's pages, shared with the page cache and every moat process)"
	echo "  peak RSS (VmHWM at exit, KiB) per process: ${m[tree]:-?}"
	echo "  (no-exec-child: a child that never ran execve, sharing its parent's memory (the direct start's init and its helpers; for the init stage, os/exec's CLONE_VM pidfd probe): not counted; ~N: sampled while running, a lower bound)"
	echo "  cross-check, host and reaped descendants folded together by the kernel: wait4 maxrss $(mib "${m[wait4_maxrss_kib]:-0}"), getrusage(RUSAGE_CHILDREN) $(mib "${m[rusage_children_kib]:-0}")"
}
echo
memline "$(id -un)" indir "$ws" timeout 60 "$timeit" -mem -- "$tmp/moat" run -- /bin/true
if [ -n "$user" ]; then
	memline "$user" indir "$uws" timeout 60 "${asuser[@]}" "$ubin/timeit" -mem -- "$ubin/moat" run -- /bin/true
fi
if [ "${#failed[@]}" -gt 0 ]; then
	echo
	echo "rows left out because they failed: ${failed[*]}"
fi
