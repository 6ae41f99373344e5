#!/usr/bin/env bash
# bench/syscalls.sh: what moat's system-call filters cost a syscall-heavy
# command (issue 3, "Performance"): the same workloads with no filter
# (--seccomp unconfined), moat's `default` and `strict` profiles and Docker's
# default profile (--seccomp internal/seccomp/testdata/docker-default.json,
# which moat runs with its floor stacked as a second filter), and outside
# any sandbox for reference, bare and under a one-instruction allow-all
# filter (the price of having any filter at all: the floor under every
# profile). Goal: default <= 1.05x unconfined.
#
# Usage:  bench/syscalls.sh            (from any directory; root recommended)
#         REPS=11 bench/syscalls.sh    (runs of the loop per profile; default 7)
#         CALLS=5000000 bench/syscalls.sh (calls per loop run; default 1000000)
#         N=50 bench/syscalls.sh       (timed `find /usr` runs per profile; default 20)
# Needs Go (on PATH or in /usr/local/go/bin) to build moat, the timer and the
# workload. Runs as root or as an ordinary user (nothing is installed).
#
# What it does:
#   1. Builds moat, the timer bench/timeit and the workload
#      bench/syscallbench (static, CGO_ENABLED=0) into a temporary
#      directory, and copies the workload into a fresh workspace under /tmp.
#   2. (a) Runs `syscallbench -call getppid` (CALLS raw getppid system calls
#      in a loop; it prints ns per call, timed around the loop only, so the
#      start-up of the process and of the sandbox is not counted) REPS times
#      under each profile and outside any sandbox (bare, and under the
#      allow-all filter that `syscallbench -filter allow` installs on the
#      looping thread), in rounds that alternate
#      between them, and prints the minimum ns/op (the run least disturbed
#      by other load: the loop is pure CPU) and the median, each with its
#      ratio to unconfined. The same with `-call ioctl` (ioctl(/dev/null, TCGETS),
#      ENOTTY): every profile checks ioctl's arguments, so the kernel must
#      run the BPF programs for it, whereas getppid, which no profile
#      conditions, may be decided by the kernel's seccomp action cache
#      without running them; the two rows bracket the filters' cost.
#   3. (b) Times `moat run --seccomp P -- sh -c 'find /usr > /dev/null'`
#      N times per profile with bench/timeit (fork to reap: this includes
#      moat's start-up, a few ms of each run, the same for every profile),
#      in rounds, and prints median, p90 and the ratio to unconfined; outside
#      any sandbox too, bare and under the allow-all filter (syscallbench
#      -filter allow -- sh -c ...). find exits 1 for the few directories
#      the unprivileged command may not read, which is accepted; the number
#      of entries find sees is printed per row as a check that the filter
#      did not change what it does (outside, run as root, it sees more).
#
# Numbers move with the load of the machine: the load average is printed
# first; compare runs made under similar load. Temporary directories are
# removed on exit.
set -euo pipefail

REPS=${REPS:-7}
CALLS=${CALLS:-1000000}
N=${N:-20}
ROUNDS=${ROUNDS:-4}
for v in REPS CALLS N ROUNDS; do
	case ${!v} in '' | *[!0-9]*) echo "$v must be a positive integer" >&2; exit 2 ;; esac
	if [ "${!v}" -lt 1 ]; then echo "$v must be at least 1" >&2; exit 2; fi
done
if [ "$ROUNDS" -gt "$N" ]; then ROUNDS=$N; fi

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

tmp=''
newtmp tmp syscalls
ws=$tmp/ws
mkdir "$ws"

machine_line
[ "$uid" -eq 0 ] || echo "== not root: works the same (moat runs rootless; nothing is installed here)"
echo "== $CALLS calls per loop run, $REPS loop runs and $N find runs per profile, in rounds; workspace $ws"
if [ -r /sys/devices/system/cpu/vulnerabilities/spec_store_bypass ]; then
	# seccomp can force Speculative Store Bypass Disable on the filtered
	# process, which slows all of its code, not only its system calls.
	echo "== spec_store_bypass: $(cat /sys/devices/system/cpu/vulnerabilities/spec_store_bypass)"
fi

# --- build -----------------------------------------------------------------
go_build "$tmp" cmd/moat bench/timeit
go_build "$ws" bench/syscallbench
moat=$tmp/moat
timeit=$tmp/timeit
echo "== moat $(git -C "$repo" describe --always --dirty 2>/dev/null || echo '(no git)'); $(go version | cut -d' ' -f3)"

docker=$repo/internal/seccomp/testdata/docker-default.json
names=(raw floor unconfined default strict docker)
labels=("no sandbox (reference)" "no sandbox, allow-all filter" "moat, unconfined" "moat, default" "moat, strict" "moat, docker-default.json + floor")
profile() { # profile NAME: the --seccomp value of a row
	case $1 in
	docker) echo "$docker" ;;
	*) echo "$1" ;;
	esac
}
# cmd_of NAME CMD...: sets the array run_cmd to CMD as row NAME runs it
run_cmd=()
cmd_of() {
	local name=$1
	shift
	if [ "$name" = raw ]; then
		run_cmd=("$@")
	elif [ "$name" = floor ]; then
		run_cmd=("$ws/syscallbench" -filter allow -- "$@")
	else
		run_cmd=("$moat" run --seccomp "$(profile "$name")" -- "$@")
	fi
}

failed=()
declare -A bad # rows that failed, by NAME (or NAME.find)
note_failure() { # note_failure KEY LABEL FILE
	bad[$1]=1
	failed+=("$1")
	echo "-- $2 failed; leaving out its row:" >&2
	sed 's/^/   /' "$3" >&2
}

# --- (a) the getppid and ioctl loops ---------------------------------------------
calls=(getppid ioctl)
echo "== (a) loops: $((REPS * ${#names[@]} * ${#calls[@]})) runs..."
for ((r = 0; r < REPS; r++)); do
	for name in "${names[@]}"; do
		for call in "${calls[@]}"; do
			[ -z "${bad[$name.$call]:-}" ] || continue
			if [ "$name" = floor ]; then
				run_cmd=(./syscallbench -filter allow -n "$CALLS" -call "$call")
			else
				cmd_of "$name" ./syscallbench -n "$CALLS" -call "$call"
			fi
			if out=$(indir "$ws" timeout 120 "${run_cmd[@]}" 2>"$tmp/err"); then
				# the workload's line: "CALL N NS_PER_OP"
				ns=$(awk -v c="$call" '$1 == c && NF == 3 { print $3 }' <<<"$out")
				if [ -n "$ns" ]; then
					echo "$ns" >>"$tmp/$name.$call.ns"
					continue
				fi
				echo "no result line in: $out" >>"$tmp/err"
			fi
			note_failure "$name.$call" "$name $call loop" "$tmp/err"
		done
	done
done

# --- (b) find /usr ----------------------------------------------------------------
echo "== (b) find /usr: $((N * ${#names[@]})) runs..."
declare -A entries
for name in "${names[@]}"; do
	cmd_of "$name" sh -c 'find /usr 2>/dev/null | wc -l'
	if e=$(indir "$ws" timeout 120 "${run_cmd[@]}" 2>"$tmp/err"); then
		entries[$name]=$e
	else
		note_failure "$name.find" "$name find /usr" "$tmp/err"
	fi
done
for ((r = 0; r < ROUNDS; r++)); do
	n=$((N / ROUNDS + (r < N % ROUNDS ? 1 : 0)))
	for name in "${names[@]}"; do
		[ -z "${bad[$name.find]:-}" ] || continue
		# find exits 1 for a directory it may not read (inside, the command
		# is not root); the entries column shows what it walked.
		cmd_of "$name" sh -c 'find /usr > /dev/null 2>&1 || [ $? -eq 1 ]'
		if ! indir "$ws" timeout "$((120 + 5 * n))" "$timeit" -raw -warmup 1 -n "$n" -- "${run_cmd[@]}" >>"$tmp/$name.find.ms" 2>"$tmp/err"; then
			note_failure "$name.find" "$name find /usr" "$tmp/err"
		fi
	done
done

# --- tables ----------------------------------------------------------------------
ratio() { # ratio A B: A/B to 3 decimals, or n/a
	if [ -n "${1:-}" ] && [ -n "${2:-}" ]; then awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; else printf 'n/a'; fi
}
# median FILE: the median of the numbers in FILE (one a line)
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
span() { sort -g "$1" | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.1f-%.1f", lo, hi }'; }

# Per row and call: the minimum (the run least disturbed by other load on the
# machine: the loop is pure CPU, so its intrinsic cost) and the median.
declare -A nsmin nsmed
for name in "${names[@]}"; do
	for call in "${calls[@]}"; do
		f=$tmp/$name.$call.ns
		if [ -z "${bad[$name.$call]:-}" ] && [ -s "$f" ]; then
			nsmin[$name.$call]=$(sort -g "$f" | head -n 1)
			nsmed[$name.$call]=$(median "$f")
		fi
	done
done
for call in "${calls[@]}"; do
	echo
	case $call in
	getppid) echo "(a) $CALLS getppid calls in a loop (no profile looks at its arguments), ns per call over $REPS runs" ;;
	ioctl) echo "(a') $CALLS ioctl(/dev/null, TCGETS) calls in a loop (every profile checks its arguments), ns per call over $REPS runs" ;;
	esac
	printf '%-34s | %8s | %9s | %13s | %10s | %s\n' profile "min ns" "median ns" "range" "x unconf" "x unconf (median)"
	printf '%-34s-|-%8s-|-%9s-|-%13s-|-%10s-|-%s\n' ---------------------------------- -------- --------- ------------- ---------- -----------------
	for i in "${!names[@]}"; do
		name=${names[$i]}
		if [ -z "${nsmin[$name.$call]:-}" ]; then
			printf '%-34s | %8s |\n' "${labels[$i]}" failed
			continue
		fi
		printf '%-34s | %8.2f | %9.2f | %13s | %10s | %s\n' "${labels[$i]}" "${nsmin[$name.$call]}" "${nsmed[$name.$call]}" \
			"$(span "$tmp/$name.$call.ns")" "$(ratio "${nsmin[$name.$call]}" "${nsmin[unconfined.$call]:-}")" \
			"$(ratio "${nsmed[$name.$call]}" "${nsmed[unconfined.$call]:-}")"
	done
done

declare -A fmed fp90
for name in "${names[@]}"; do
	if [ -n "${bad[$name.find]:-}" ] || [ ! -s "$tmp/$name.find.ms" ]; then continue; fi
	read -r m p _ _ < <("$timeit" -stats "$tmp/$name.find.ms")
	fmed[$name]=$m
	fp90[$name]=$p
done
echo
echo "(b) sh -c 'find /usr > /dev/null', $N runs each, ms per run including the sandbox's start-up"
printf '%-34s | %9s | %8s | %8s | %s\n' profile "median ms" "p90 ms" "x unconf" "entries"
printf '%-34s-|-%9s-|-%8s-|-%8s-|-%s\n' ---------------------------------- --------- -------- -------- -------
for i in "${!names[@]}"; do
	name=${names[$i]}
	[ -n "${fmed[$name]:-}" ] || continue
	printf '%-34s | %9.2f | %8.2f | %8s | %s\n' "${labels[$i]}" "${fmed[$name]}" "${fp90[$name]}" "$(ratio "${fmed[$name]}" "${fmed[unconfined]:-}")" "${entries[$name]:-?}"
done

echo
verdict() { # verdict VALUE GOAL: met / NOT met / n/a
	if [ "$1" = n/a ]; then echo n/a; return; fi
	awk -v v="$1" -v g="$2" 'BEGIN { if (v <= g) print "met"; else print "NOT met" }'
}
for w in getppid ioctl find; do
	case $w in
	find) r=$(ratio "${fmed[default]:-}" "${fmed[unconfined]:-}") ;;
	*) r=$(ratio "${nsmin[default.$w]:-}" "${nsmin[unconfined.$w]:-}") ;;
	esac
	case $w in
	find) what="find /usr, median" ;;
	*) what="$w loop, min" ;;
	esac
	echo "default / unconfined, $what: $r (goal <= 1.05: $(verdict "$r" 1.05))"
done

if [ "${#failed[@]}" -gt 0 ]; then
	echo
	echo "failed: ${failed[*]}"
	exit 1
fi
