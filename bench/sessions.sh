#!/usr/bin/env bash
# bench/sessions.sh: what a command costs in a live session, side by side
# with a one-shot moat run and bubblewrap, on this machine.
#
# Usage:  bench/sessions.sh          (root recommended; N=300 by default)
#         N=1000 bench/sessions.sh
# Needs Go (on PATH or in /usr/local/go/bin).
#
# Rows (each the time from request to exit status of /bin/true):
#   bwrap                      one-shot, with the setup of bench/startup.sh
#   moat run                   one-shot, default policy
#   session exec (library)     sandbox-level: backend.Instance.Exec + Wait
#                              (backend/native BenchmarkSessionExec, mean)
#   session exec (HTTP API)    through moat serve's API on its unix socket
#                              and the Go client (httpapi BenchmarkExecTrue:
#                              p50 and p99), with the daemon in the test
#                              binary and then a real `moat serve`
#   run_command over MCP       the MCP server's tool, in memory and over
#                              stdio (mcpserver BenchmarkRunTrue, mean)
#   session create             cold (also against the real moat serve), and
#                              from a warm pool (full, and while it
#                              refills) (httpapi BenchmarkCreate*)
# and the host memory of an idle session (httpapi BenchmarkIdleSession,
# and measured from outside a real moat serve).
# The one-shot rows are timed by bench/timeit (fork to reap); the session
# rows by Go benchmarks in the same script, so that load hits all alike.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
n=${N:-300}
newtmp tmp sessions
newtmp ws ws
go_build "$tmp" cmd/moat bench/timeit
timeit=$tmp/timeit
machine_line

row() { printf '%-34s | %9s | %9s | %s\n' "$@"; }
row variant "p50 ms" "p99 ms" "ratio to bwrap (p50)"
row "----------------------------------" --------- --------- --------------------

bw=
if command -v bwrap >/dev/null; then
	args=(--ro-bind /usr /usr)
	for d in bin lib lib64 sbin; do
		if [ -L "/$d" ]; then args+=(--symlink "$(readlink "/$d")" "/$d"); elif [ -d "/$d" ]; then args+=(--ro-bind "/$d" "/$d"); fi
	done
	args+=(--ro-bind /etc /etc --tmpfs /tmp --bind "$ws" "$ws" --proc /proc --dev /dev --unshare-all --die-with-parent --cap-drop ALL --chdir "$ws")
	read -r bw _ < <(indir "$ws" "$timeit" -warmup 5 -n "$n" -- bwrap "${args[@]}" /bin/true)
	row bwrap "$bw" "" 1.00
fi
read -r m _ < <(indir "$ws" "$timeit" -warmup 5 -n "$n" -- "$tmp/moat" run -- /bin/true)
row "moat run (one-shot)" "$m" "" "$(ratio "$m" "$bw")"

# pct LINE METRIC: the value a benchmark's output line gives for METRIC.
pct() { awk -v k="$2" '{for (i=1;i<=NF;i++) if ($(i+1)==k) print $i}' <<<"$1"; }
# bench NAME PKG BENCH: the Go benchmark's output lines.
bench() { (cd "$repo" && CGO_ENABLED=0 go test -run '^$' -bench "$2" -benchtime "${n}x" -count 1 "./$1" 2>&1 | grep -E '^Benchmark'); }
lib=$(bench backend/native 'BenchmarkSessionExec$' | awk '{print $3/1e6}')
row "session exec (library, mean)" "$lib" "" "$(ratio "$lib" "$bw")"
api=$(bench httpapi 'BenchmarkExecTrue$')
p50=$(awk '{for (i=1;i<=NF;i++) if ($(i+1)=="p50-ms") print $i}' <<<"$api")
p99=$(awk '{for (i=1;i<=NF;i++) if ($(i+1)=="p99-ms") print $i}' <<<"$api")
row "session exec (HTTP API)" "$p50" "$p99" "$(ratio "$p50" "$bw")"

# The same exec, and a cold create, against `moat serve` from the binary
# built above (linked with its entry point, as the README builds it): the
# rows above and below use a daemon inside the Go test binary, whose
# sandboxes' inits are that binary.
sock=$tmp/moat.sock
"$tmp/moat" serve --socket "$sock" --max-sessions 64 >"$tmp/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { cat "$tmp/serve.log" >&2; echo "moat serve did not start" >&2; exit 1; }
served=$(MOAT_BENCH_SOCKET=$sock bench httpapi 'BenchmarkExecTrue$')
s50=$(pct "$served" p50-ms)
row "session exec (HTTP API, moat serve)" "$s50" "$(pct "$served" p99-ms)" "$(ratio "$s50" "$bw")"
served=$(N=${N_CREATE:-100} n=${N_CREATE:-100} MOAT_BENCH_SOCKET=$sock bench httpapi 'BenchmarkCreateCold$')
s50=$(pct "$served" p50-ms)
row "session create (cold, moat serve)" "$s50" "$(pct "$served" p99-ms)" "$(ratio "$s50" "$bw"); $(ratio "$s50" "$m") of moat run"
while read -r name _ ns _; do
	ms=$(awk -v v="$ns" 'BEGIN { printf "%.2f", v / 1e6 }')
	row "MCP run_command ${name#BenchmarkRunTrue/} (mean)" "$ms" "" "$(ratio "$ms" "$bw")"
done < <(bench mcpserver 'BenchmarkRunTrue' | sed 's/-[0-9]* / /')

# Session create, cold and from a template's warm pool (httpapi
# BenchmarkCreate*: request to answer, the session deleted outside the
# timing), against a one-shot run.
while read -r line; do
	name=$(awk '{print $1}' <<<"$line"); name=${name%-*}
	case $name in
	BenchmarkCreateCold) label="session create (cold)" ;;
	BenchmarkCreatePool) label="session create (warm pool)" ;;
	BenchmarkCreatePoolRefilling) label="session create (pool, refilling)" ;;
	*) continue ;;
	esac
	c50=$(pct "$line" p50-ms)
	row "$label" "$c50" "$(pct "$line" p99-ms)" "$(ratio "$c50" "$bw"); $(ratio "$c50" "$m") of moat run"
done < <(N=${N_CREATE:-100} n=${N_CREATE:-100} bench httpapi 'BenchmarkCreate')

# Host memory an idle session holds (httpapi BenchmarkIdleSession, 20
# sessions): its sandbox's processes (PSS, and RSS which counts shared
# pages for each) and the daemon's Go heap and goroutine stacks per
# session.
# BenchmarkIdleSessionAllow: the same in allow mode, with each session's
# proxy and TUN device's network stack in the daemon.
echo
while read -r idle; do
	case $idle in
	BenchmarkIdleSessionAllow*) label="idle session, --net allow" ;;
	*) label="idle session" ;;
	esac
	printf '%s: %s KiB PSS (%s KiB RSS) in %s process(es) + %s KiB of the daemon'"'"'s heap and stacks\n' "$label" \
		"$(pct "$idle" pss-KiB/session)" "$(pct "$idle" rss-KiB/session)" "$(pct "$idle" procs/session)" "$(pct "$idle" daemon-KiB/session)"
done < <(cd "$repo" && CGO_ENABLED=0 go test -run '^$' -bench 'BenchmarkIdleSession' -benchtime 1x -count 1 ./httpapi 2>&1 | grep -E '^Benchmark')
# The same against the real moat serve, measured from outside: 20 sessions,
# each after one command; their inits' PSS (smaps_rollup), and the growth
# of the daemon's anonymous memory per session (its PSS would fall as the
# inits share the binary's pages with it).
kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
daemon_pid=${pids[${#pids[@]}-1]}
before=$(kib "$daemon_pid" Anonymous)
ids=()
for _ in $(seq 20); do
	id=$(MOAT_SOCKET=$sock "$tmp/moat" session create --temp)
	MOAT_SOCKET=$sock "$tmp/moat" exec "$id" -- /bin/true
	ids+=("$id")
done
sleep 1
after=$(kib "$daemon_pid" Anonymous)
inits=0 n_inits=0
for p in $(pgrep -P "$daemon_pid" -f '^moat-sandbox-init' || true); do
	inits=$((inits + $(kib "$p" Pss)))
	n_inits=$((n_inits + 1))
done
printf 'idle session, moat serve: %s KiB PSS of its init (%s inits) + %s KiB of the daemon'"'"'s anonymous memory (20 sessions)\n' \
	$((inits / 20)) "$n_inits" $(((after - before) / 20))
MOAT_SOCKET=$sock "$tmp/moat" session rm "${ids[@]}" >/dev/null

echo
echo "goals (issue #18, #20): session exec through the API p50 <= 1.0 ms; run_command within 1 ms of a session exec;"
echo "  create cold <= 1.5x moat run, from the pool p50 <= 2 ms; idle session <= 2 MiB"
