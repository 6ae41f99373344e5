#!/usr/bin/env bash
# bench/workspace.sh: what the copy-on-write workspace costs (issue 5,
# "Performance"): the extra start-up time of `--workspace-mode overlay` over
# `direct` for a workspace of 10,000 files (goal <= 2 ms), and the time of
# `moat diff` for 100 changes in such a workspace (goal <= 50 ms), side by
# side with bubblewrap's --overlay and with the bare kernel mounts.
#
# Usage:  bench/workspace.sh          (from any directory; root recommended)
#         N=300 bench/workspace.sh    (timed runs per variant; default 100)
#         ROUNDS=20 bench/workspace.sh (rounds the runs are split into; default 10)
# Needs Go (on PATH or in /usr/local/go/bin) to build moat, the timer and
# the file-system probe bench/fsprobe.
# Runs as root or as an ordinary user; only root installs a missing
# bubblewrap (apt-get), anyone else gets its rows left out.
#
# What it does:
#   1. Builds moat, the timer bench/timeit and bench/fsprobe (CGO_ENABLED=0)
#      into a temporary directory.
#   2. Makes a workspace under /tmp (not $HOME): 100 directories of 100
#      small text files (20 lines), committed to a git repository. Every
#      change set lives in a state directory of its own under the temporary
#      directory (MOAT_STATE_DIR), never in the real one.
#   3. Times N runs of /bin/true under each start-up variant, each run on its
#      own with bench/timeit (fork to reap, monotonic clock), in ROUNDS
#      rounds that alternate between the variants, so that a change of load
#      on the machine hits every variant alike (3 untimed runs per variant
#      in the first round, 1 in the others):
#        moat direct           moat run -- /bin/true
#        moat overlay, session moat run --workspace-mode overlay --session
#                              bench -- /bin/true: every run reopens the same
#                              change set, as an agent's install/edit/test
#                              loop does (issue 5: sessions). Nothing piles up.
#        moat overlay, new     moat run --workspace-mode overlay -- /bin/true:
#                              every run creates a change set, which is part
#                              of what a one-off overlay run costs; each is
#                              discarded (moat discard, timed apart) after
#                              its run, outside the timing, so they do not
#                              pile up (a state directory full of change sets
#                              would slow down the session lookup, which
#                              reads every change set's meta.json).
#        moat overlay, session, state on tmpfs
#                              the session row with MOAT_STATE_DIR on
#                              /dev/shm: separates the cost of the upper
#                              layer's filesystem from moat's own.
#        bwrap bind / bwrap overlay
#                              bwrap with moat's default root (as
#                              bench/startup.sh builds it) and the workspace
#                              --bind, or --overlay-src WS --overlay RW WORK WS
#                              (bubblewrap >= 0.9; an older one is reported
#                              and its row left out).
#        unshare + bind / + overlay (upper on the state dir's fs / on tmpfs)
#                              unshare -Urm, then mount(8) the workspace on
#                              itself, bind or overlay (userxattr), then exec
#                              /bin/true: the kernel's own price of the
#                              overlay mount, a floor for moat's extra.
#      The table gives median and 90th percentile, the extra over the same
#      tool's direct/bind row, and moat over bwrap in the same mode. Two
#      lines from bench/fsprobe, before and after the runs, give the median
#      time of mkdir+rmdir and of write+rename-over-a-file on the state
#      directory's filesystem and on tmpfs: what freeing a block costs there
#      (ext4 without a journal, mounted with `discard`, waits for the
#      device's discard on every freed block, and its inode allocator skips
#      recently deleted inodes one by one), which an overlay mount (it
#      replaces work/work) and a session run (it replaces meta.json) do.
#   4. One overlay run in session "diff" modifies 50 files, adds 30 and
#      deletes 20 (spread over the 100 directories); then times N runs of
#      `moat diff --stat diff`, `moat diff --format patch diff` and
#      `moat diff diff` (unified). timeit sends the output to a temporary
#      file, as `> /dev/null` would in cost.
#
# Numbers move with the load of the machine: the load average is printed
# first; compare runs made under similar load. Temporary directories (the
# workspace and every state directory) are removed on exit.
set -euo pipefail

N=${N:-100}
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

tmp='' shm=''
newtmp tmp workspace
ws=$tmp/ws
# /dev/shm for the tmpfs rows, when it is a writable tmpfs
if [ "$(stat -f -c %T /dev/shm 2>/dev/null || true)" = tmpfs ] && [ -w /dev/shm ]; then
	newtmp shm workspace /dev/shm
fi

fsinfo() { # fsinfo DIR: filesystem type and source, whether ext4 has a journal, online discard
	local src fstype opts jt
	read -r src fstype opts < <(findmnt -n -o SOURCE,FSTYPE,OPTIONS -T "$1" 2>/dev/null || echo "? ? ?")
	printf '%s on %s' "$fstype" "$src"
	if [ "$fstype" = ext4 ] && [ -r "/sys/fs/ext4/${src##*/}/journal_task" ]; then
		jt=$(cat "/sys/fs/ext4/${src##*/}/journal_task")
		[ "$jt" = "<none>" ] && printf ', no journal'
	fi
	case ,$opts, in *,discard,*) printf ', online discard' ;; esac
}

machine_line
[ "$uid" -eq 0 ] || echo "== not root: works, but a missing bubblewrap is not installed (its rows are left out)"
echo "== N=$N runs per variant in $ROUNDS rounds; workspace and state dirs under $tmp: $(fsinfo "$tmp")"

# --- build -----------------------------------------------------------------
go_build "$tmp" cmd/moat bench/timeit bench/fsprobe
moat=$tmp/moat
timeit=$tmp/timeit

# --- peers -----------------------------------------------------------------
skipped=() # "why" lines for the peers left out
have() { # have CMD PKG: CMD is on PATH, installing PKG if need be
	command -v "$1" >/dev/null && return 0
	echo "-- $1 missing; installing $2" >&2
	if install_pkg "$2" && command -v "$1" >/dev/null; then
		return 0
	fi
	if [ "$uid" -eq 0 ]; then
		skipped+=("$1: could not install $2: $(tail -n 1 "$tmp/apt.log" 2>/dev/null)")
	else
		skipped+=("$1: missing, and only root installs it")
	fi
	return 1
}
have_bwrap=no have_bwrap_overlay=no have_unshare=no have_mount=no
have bwrap bubblewrap && have_bwrap=yes
have unshare util-linux && have_unshare=yes
have mount mount && have_mount=yes
if [ "$have_bwrap" = yes ]; then
	if bwrap --help 2>&1 | grep -q -- '--overlay-src'; then
		have_bwrap_overlay=yes
	else
		skipped+=("bwrap overlay: $(bwrap --version 2>/dev/null) has no --overlay-src/--overlay (added in bubblewrap 0.9.0); Debian 12 ships 0.8.0")
	fi
fi
echo "== moat $(git -C "$repo" describe --always --dirty 2>/dev/null || echo '(no git)'); $(go version | cut -d' ' -f3)$(
	[ "$have_bwrap" = yes ] && printf '; %s' "$(bwrap --version 2>/dev/null)")$(
	[ "$have_unshare" = yes ] && printf '; %s' "$(unshare --version 2>/dev/null)")"

# --- the workspace -------------------------------------------------------------
mkdir "$ws"
body=$(for l in $(seq 1 20); do echo "line $l of a small source file"; done)
for d in $(seq -w 0 99); do
	mkdir "$ws/d$d"
	for f in $(seq -w 0 99); do
		printf 'd%s/f%s\n%s\n' "$d" "$f" "$body" >"$ws/d$d/f$f.txt"
	done
done
git -C "$ws" init -q
git -C "$ws" add -A
git -C "$ws" -c user.name=bench -c user.email=bench@example.invalid commit -q -m "10,000 files"
nfiles=$(find "$ws" -path "$ws/.git" -prune -o -type f -print | wc -l)
echo "== workspace: $nfiles files in 100 directories, committed to git"

st_sess=$tmp/state-session st_fresh=$tmp/state-fresh st_diff=$tmp/state-diff st_tmpfs=''
mkdir "$st_sess" "$st_fresh" "$st_diff" "$tmp/ovl" "$tmp/ovl/upper" "$tmp/ovl/work"
if [ -n "$shm" ]; then
	st_tmpfs=$shm/state
	mkdir "$st_tmpfs" "$shm/upper" "$shm/work"
fi

# bwrap arguments mirroring moat's default root, as bench/startup.sh builds
# them; the workspace is added by the caller (bind or overlay).
bwrap_root() {
	local d
	printf '%s\n' --ro-bind /usr /usr
	for d in bin lib lib32 lib64 libx32 sbin; do
		if [ -L "/$d" ]; then
			printf '%s\n' --symlink "$(readlink "/$d")" "/$d"
		elif [ -d "/$d" ]; then
			printf '%s\n' --ro-bind "/$d" "/$d"
		fi
	done
	# /tmp's tmpfs before the workspace, which lives under /tmp
	printf '%s\n' --ro-bind /etc /etc --tmpfs /tmp \
		--proc /proc --dev /dev --unshare-all --die-with-parent \
		--new-session --clearenv --cap-drop ALL
}
if [ "$have_bwrap_overlay" = yes ]; then
	mkdir "$tmp/bwrap-rw" "$tmp/bwrap-work"
fi

# --- start-up variants -----------------------------------------------------------
names=() labels=() bases=() peers=()
add() { # add NAME LABEL DIRECT-ROW BWRAP-ROW
	names+=("$1") labels+=("$2") bases+=("$3") peers+=("$4")
}
add direct "moat direct" "" bwrap_bind
add session "moat overlay, session" direct bwrap_overlay
add fresh "moat overlay, new change set" direct bwrap_overlay
[ -n "$shm" ] && add session_tmpfs "moat overlay, session, state tmpfs" direct bwrap_overlay
if [ "$have_bwrap" = yes ]; then
	add bwrap_bind "bwrap bind" "" ""
	[ "$have_bwrap_overlay" = yes ] && add bwrap_overlay "bwrap overlay" bwrap_bind ""
fi
if [ "$have_unshare" = yes ] && [ "$have_mount" = yes ]; then
	add unshare_bind "unshare + bind mount" "" ""
	add unshare_overlay "unshare + overlay ($(fsinfo "$tmp" | cut -d' ' -f1) upper)" unshare_bind ""
	[ -n "$shm" ] && add unshare_overlay_tmpfs "unshare + overlay (tmpfs upper)" unshare_bind ""
fi


# change_sets DIR: the IDs of the change sets in state directory DIR
change_sets() {
	local d
	for d in "$1"/runs/*/; do
		[ -d "$d" ] || continue
		d=${d%/}
		d=${d##*/}
		case $d in [0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]) echo "$d" ;; esac
	done
}

# fresh_run [SAMPLES]: one overlay run that creates a change set, timed when
# SAMPLES is given, then `moat discard` of it (timed apart).
fresh_run() {
	local id
	if [ -n "${1:-}" ]; then
		indir "$ws" env MOAT_STATE_DIR="$st_fresh" "$timeit" -raw -warmup 0 -n 1 -- \
			"$moat" run --workspace-mode overlay -- /bin/true >>"$1"
	else
		(cd "$ws" && MOAT_STATE_DIR=$st_fresh "$moat" run --workspace-mode overlay -- /bin/true) >/dev/null 2>&1
	fi
	for id in $(change_sets "$st_fresh"); do
		if [ -n "${1:-}" ]; then
			MOAT_STATE_DIR=$st_fresh "$timeit" -raw -warmup 0 -n 1 -- "$moat" discard "$id" >>"$tmp/discard.samples"
		else
			MOAT_STATE_DIR=$st_fresh "$moat" discard "$id" >/dev/null
		fi
	done
}

# run_variant NAME RUNS WARMUP: append RUNS times (ms), one per line, to
# NAME's file, after WARMUP untimed runs
run_variant() {
	local n=$2 warm=$3 out=$tmp/$1.samples i
	local -a cmd env=()
	case $1 in
	direct) cmd=("$moat" run -- /bin/true) ;;
	session)
		env=(MOAT_STATE_DIR="$st_sess")
		cmd=("$moat" run --workspace-mode overlay --session bench -- /bin/true)
		;;
	session_tmpfs)
		env=(MOAT_STATE_DIR="$st_tmpfs")
		cmd=("$moat" run --workspace-mode overlay --session bench -- /bin/true)
		;;
	fresh)
		for ((i = 0; i < warm; i++)); do fresh_run; done
		for ((i = 0; i < n; i++)); do fresh_run "$out"; done
		return
		;;
	bwrap_bind)
		mapfile -t cmd < <(bwrap_root)
		cmd=(bwrap "${cmd[@]}" --bind "$ws" "$ws" --chdir "$ws" /bin/true)
		;;
	bwrap_overlay)
		mapfile -t cmd < <(bwrap_root)
		cmd=(bwrap "${cmd[@]}" --overlay-src "$ws" --overlay "$tmp/bwrap-rw" "$tmp/bwrap-work" "$ws" --chdir "$ws" /bin/true)
		;;
	unshare_bind)
		# shellcheck disable=SC2016 # expanded by the inner shell
		cmd=(unshare -Urm sh -c 'mount --bind "$1" "$1" && exec /bin/true' sh "$ws")
		;;
	unshare_overlay | unshare_overlay_tmpfs)
		local up=$tmp/ovl
		[ "$1" = unshare_overlay_tmpfs ] && up=$shm
		# shellcheck disable=SC2016 # expanded by the inner shell
		cmd=(unshare -Urm sh -c 'mount -t overlay overlay -o "lowerdir=$1,upperdir=$2/upper,workdir=$2/work,userxattr" "$1" && exec /bin/true' sh "$ws" "$up")
		;;
	esac
	indir "$ws" env "${env[@]}" timeout "$((60 + n))" "$timeit" -raw -warmup "$warm" -n "$n" -- "${cmd[@]}" >>"$out"
}

# probe_line WHEN: what freeing a block costs on the state directory's
# filesystem and on tmpfs (bench/fsprobe): an overlay mount removes its
# work directory's work/ and a session run replaces meta.json.
probe_line() {
	local a b="" a1 a2 b1 b2
	a=$("$tmp/fsprobe" -n 50 "$tmp") || return 0
	[ -z "$shm" ] || b=$("$tmp/fsprobe" -n 50 "$shm") || b=''
	read -r a1 a2 <<<"$a"
	printf 'host filesystem (%s the start-up runs): mkdir+rmdir %s ms, write+rename-over %s ms on %s' "$1" "$a1" "$a2" "$(fsinfo "$tmp")"
	if [ -n "$b" ]; then
		read -r b1 b2 <<<"$b"
		printf '; %s ms and %s ms on tmpfs' "$b1" "$b2"
	fi
	echo
}
probe_before=$(probe_line before)

failed=()
echo "== start-up: timing $((${#names[@]} * N)) runs..."
for ((r = 0; r < ROUNDS; r++)); do
	run_round "$((N / ROUNDS + (r < N % ROUNDS ? 1 : 0)))" "$((r == 0 ? 3 : 1))"
done

# --- start-up table --------------------------------------------------------------
collect_stats
extra() { # extra A B: A-B in ms to 2 decimals, or n/a
	if [ -n "${1:-}" ] && [ -n "${2:-}" ]; then awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.2f", a - b }'; else printf 'n/a'; fi
}

echo
echo "start-up of /bin/true, workspace of $nfiles files (ms; extra and ratio vs the same tool's direct/bind row)"
printf '%-38s | %9s | %8s | %8s | %8s | %s\n' variant "median ms" "p90 ms" "extra ms" "x direct" "x bwrap same mode"
printf '%-38s-|-%9s-|-%8s-|-%8s-|-%8s-|-%s\n' -------------------------------------- --------- -------- -------- -------- -----------------
for i in "${!names[@]}"; do
	name=${names[$i]}
	[ -n "${med[$name]:-}" ] || continue
	b=${bases[$i]} p=${peers[$i]}
	e='' x='' y=''
	if [ -n "$b" ]; then
		e=$(extra "${med[$name]}" "${med[$b]:-}")
		x=$(ratio "${med[$name]}" "${med[$b]:-}")
	fi
	[ -n "$p" ] && y=$(ratio "${med[$name]}" "${med[$p]:-}")
	printf '%-38s | %9.2f | %8.2f | %8s | %8s | %s\n' "${labels[$i]}" "${med[$name]}" "${p90[$name]}" "$e" "$x" "$y"
done
if [ -s "$tmp/discard.samples" ]; then
	read -r m p _ _ < <("$timeit" -stats "$tmp/discard.samples")
	printf '%-38s | %9.2f | %8.2f | (after each new-change-set run, not in its time)\n' "moat discard (empty change set)" "$m" "$p"
fi
echo
verdict() { # verdict VALUE GOAL: met / NOT met
	awk -v v="$1" -v g="$2" 'BEGIN { if (v <= g) print "met"; else print "NOT met" }'
}
for name in session fresh; do
	if [ -z "${med[$name]:-}" ] || [ -z "${med[direct]:-}" ]; then continue; fi
	e=$(extra "${med[$name]}" "${med[direct]}")
	case $name in
	session) what="overlay (session reused)" ;;
	fresh) what="overlay (new change set) " ;;
	esac
	echo "$what extra start-up over direct: $e ms (goal <= 2 ms: $(verdict "${e#+}" 2))"
done
if [ -n "${med[unshare_overlay]:-}" ] && [ -n "${med[unshare_bind]:-}" ]; then
	echo "kernel floor, overlay mount over bind mount: $(extra "${med[unshare_overlay]}" "${med[unshare_bind]}") ms with the upper layer on $(fsinfo "$tmp")$(
		[ -n "${med[unshare_overlay_tmpfs]:-}" ] && printf ', %s ms on tmpfs' "$(extra "${med[unshare_overlay_tmpfs]}" "${med[unshare_bind]}")")"
fi
left=$(change_sets "$st_fresh" | wc -l)
sess=$(change_sets "$st_sess" | wc -l)
echo "change sets left: $left in the new-change-set state dir (want 0), $sess in the session state dir (want 1)"
for s in "${skipped[@]}"; do
	echo "skipped $s"
done
echo "$probe_before"
probe_line after

# --- moat diff ------------------------------------------------------------------
echo
echo "== moat diff: one overlay run in session \"diff\" modifies 50 files, adds 30, deletes 20"
# shellcheck disable=SC2016 # the script runs inside the sandbox
edit='for i in $(seq -w 0 49); do sed -i "s/^line 10 of/LINE 10 OF/" d$i/f00.txt; done
for i in $(seq -w 50 79); do printf "new file %s\n" $i > d$i/new.txt; done
for i in $(seq -w 80 99); do rm d$i/f00.txt; done'
if ! (cd "$ws" && MOAT_STATE_DIR=$st_diff "$moat" run --workspace-mode overlay --session diff -- sh -c "$edit") >"$tmp/diff-setup.log" 2>&1; then
	echo "-- the editing run failed; no diff rows:" >&2
	sed 's/^/   /' "$tmp/diff-setup.log" >&2
	failed+=(diff)
else
	stat_line=$(MOAT_STATE_DIR=$st_diff "$moat" diff --stat diff | tail -n 1)
	counts=$(MOAT_STATE_DIR=$st_diff "$moat" diff --stat diff | awk '$2 != "" && $1 ~ /^[AMD]$/ { n[$1]++ } END { printf "%d modified, %d added, %d deleted", n["M"], n["A"], n["D"] }')
	echo "== moat diff --stat: $stat_line ($counts)"
	if [ -n "$(git -C "$ws" status --porcelain)" ]; then
		echo "-- WARNING: the real workspace changed during the overlay run" >&2
	fi
	dnames=(stat patch unified)
	dlabels=("moat diff --stat diff" "moat diff --format patch diff" "moat diff diff (unified)")
	dargs=("--stat" "--format patch" "")
	echo
	printf '%-30s | %9s | %8s | %s\n' command "median ms" "p90 ms" "goal <= 50 ms"
	printf '%-30s-|-%9s-|-%8s-|-%s\n' ------------------------------ --------- -------- -------------
	for i in "${!dnames[@]}"; do
		# shellcheck disable=SC2086 # dargs are words
		if out=$(MOAT_STATE_DIR=$st_diff timeout "$((60 + N))" "$timeit" -warmup 3 -n "$N" -- "$moat" diff ${dargs[$i]} diff 2>&1); then
			read -r m p _ _ <<<"$out"
			printf '%-30s | %9.2f | %8.2f | %s\n' "${dlabels[$i]}" "$m" "$p" "$(verdict "$m" 50)"
		else
			echo "-- ${dlabels[$i]} failed: $out" >&2
			failed+=("diff-${dnames[$i]}")
		fi
	done
	bytes=$(MOAT_STATE_DIR=$st_diff "$moat" diff --format patch diff | wc -c)
	echo "(patch output: $bytes bytes; timeit writes the output to a temporary file, about what > /dev/null costs)"
fi

if [ "${#failed[@]}" -gt 0 ]; then
	echo
	echo "failed: ${failed[*]}"
	exit 1
fi
