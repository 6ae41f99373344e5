#!/usr/bin/env bash
# bench/egress.sh: what moat's egress proxy (`--net allow:…`) costs, side by
# side with Anthropic's sandbox-runtime (srt), on this machine.
#
# Usage:  bench/egress.sh             (from any directory; root recommended)
#         REPS=5 bench/egress.sh      (1 GiB downloads per variant; default 3)
#         CONNS=500 bench/egress.sh   (new connections per variant; default 200)
#         N=200 bench/egress.sh       (moat start-up runs per variant; default 100)
#         SRT_N=40 bench/egress.sh    (srt start-up runs per variant; default 20)
#         NO_SRT=1 bench/egress.sh    (leave srt out)
# Needs Go (on PATH or in /usr/local/go/bin) and curl. Takes about a minute
# (62 s here under a load of ~3; srt's downloads are most of it).
#
# What it does:
#   1. Builds moat, the timer bench/timeit and bench/egressbench (static,
#      CGO_ENABLED=0) into a temporary directory, and starts on loopback:
#        egressbench serve -tls   HTTP and HTTPS (self-signed) servers with
#                                 /1g (1 GiB from one in-memory buffer) and
#                                 /small (3 bytes)
#        egressbench relay        a bare TCP relay (io.Copy both ways, that
#                                 is splice(2)) to the HTTP server: what one
#                                 extra user-space hop costs here, with no
#                                 sandbox and no proxy protocol
#   2. As root, installs a missing srt: apt bubblewrap, socat, ripgrep, then
#      `npm install -g @anthropic-ai/sandbox-runtime` (npm must be there; node
#      is not installed). A peer that is missing or does not run here is
#      reported with the reason and its rows are left out.
#   3. Both sandboxes get the same allowlist: example.com and the loopback
#      servers (moat: a policy file with allow = ["example.com"] and
#      allow_cidrs = ["127.0.0.1/32"], since IP literals match allow_cidrs
#      only and there is no flag for it; srt: allowedDomains example.com and
#      127.0.0.1:PORT). Each sandbox has its own network namespace, so a
#      download that arrives at all went through the sandbox's proxy; the
#      size is checked so that a refusal page cannot pass for a download.
#      Inside, curl is run as
#        curl --noproxy '' -x "$HTTP_PROXY" ...   (NO_PROXY/no_proxy unset)
#      since both sandboxes put 127.0.0.1 in NO_PROXY.
#   4. Throughput: REPS downloads of 1 GiB per variant, the variants taking
#      turns, median MB/s (curl's %{speed_download}, 10^6 bytes/s):
#        direct           curl on the host, no proxy
#        bare relay       curl through egressbench relay (reference)
#        moat / srt HTTP  absolute-URI request to the sandbox's HTTP proxy
#        moat / srt CONNECT   curl -p: a CONNECT tunnel, then plain HTTP
#        HTTPS            https:// direct vs through moat's CONNECT
#                         (TLS costs CPU in curl and the server alike, so
#                         its ratio is to direct HTTPS)
#      Goal for moat: >= 0.8x direct.
#   5. Added latency per new connection: egressbench conns makes CONNS
#      sequential requests for /small, each on a new connection, timed from
#      connect to the last body byte; run on the host against the server
#      (the baseline), and inside each sandbox through its proxy (copied into
#      the workspace, proxy taken from $HTTP_PROXY, srt's credentials
#      included). Split into 4 rounds taking turns; medians pooled. "added"
#      is the sandbox's median minus the host's. Goal for moat: <= 1 ms.
#   6. Start-up: /bin/true under `moat run --net none` and `moat run --net
#      allow:example.com` (N runs each, bench/timeit, 4 alternating rounds);
#      the extra is the difference of the medians (goal <= 5 ms). srt has no
#      network-off mode (its settings require network.allowedDomains, and it
#      starts its proxies even for an empty list, its way to block all), so
#      its extra is allowlist minus empty list; both totals are printed.
#   7. Prints one table: variant | MB/s | ratio to direct | added ms/conn |
#      start-up extra ms, then the goals and the moat/srt ratios.
#
# Numbers move with the load of the machine (on 2 cores a loopback download
# is CPU-bound: every extra hop competes with curl and the server for the
# same cores): the load average is printed before and after; compare runs
# made under similar load. Temporary directories and the servers are removed
# on exit.
set -euo pipefail

REPS=${REPS:-3}
CONNS=${CONNS:-200}
N=${N:-100}
SRT_N=${SRT_N:-20}
ROUNDS=4
for v in REPS CONNS N SRT_N; do
	case ${!v} in '' | *[!0-9]*) echo "$v must be a positive integer" >&2; exit 2 ;; esac
	if [ "${!v}" -lt 1 ]; then
		echo "$v must be at least 1" >&2
		exit 2
	fi
done

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

tmp='' ws=''
newtmp tmp egress
newtmp ws egress-ws
chmod 755 "$ws"

machine_line
echo "== REPS=$REPS downloads of 1 GiB, CONNS=$CONNS connections, N=$N (moat) / SRT_N=$SRT_N (srt) start-ups per variant; workspace $ws"

# --- build -----------------------------------------------------------------
if ! command -v curl >/dev/null; then
	echo "curl is needed" >&2
	exit 1
fi
go_build "$tmp" cmd/moat bench/timeit bench/egressbench
moat=$tmp/moat timeit=$tmp/timeit eb=$tmp/egressbench
cp "$eb" "$ws/egressbench"

# --- peers -----------------------------------------------------------------
srt_why='' # why srt's rows are left out ('' = they are not)
setup_srt() {
	local c missing=() pkgs=()
	if [ -n "${NO_SRT:-}" ]; then
		srt_why="NO_SRT is set"
		return
	fi
	for c in bwrap:bubblewrap socat:socat rg:ripgrep; do
		command -v "${c%%:*}" >/dev/null || { missing+=("${c%%:*}"); pkgs+=("${c#*:}"); }
	done
	if [ "${#pkgs[@]}" -gt 0 ]; then
		echo "-- srt needs ${missing[*]}; installing ${pkgs[*]}" >&2
		if ! install_pkg "${pkgs[@]}"; then
			srt_why="${missing[*]} missing and $([ "$uid" -eq 0 ] && echo "could not be installed (apt: $(tail -n 1 "$tmp/apt.log" 2>/dev/null))" || echo "not root")"
			return
		fi
	fi
	if ! command -v srt >/dev/null; then
		if [ "$uid" -ne 0 ]; then
			srt_why="srt missing and not root"
			return
		fi
		if ! command -v npm >/dev/null; then
			srt_why="srt missing and npm (node) is not installed"
			return
		fi
		echo "-- srt missing; npm install -g @anthropic-ai/sandbox-runtime" >&2
		if ! npm install -g @anthropic-ai/sandbox-runtime >"$tmp/npm.log" 2>&1 || ! command -v srt >/dev/null; then
			srt_why="npm install failed: $(tail -n 1 "$tmp/npm.log")"
			return
		fi
	fi
}
setup_srt

# --- servers -------------------------------------------------------------------
start_bg() { # start_bg FILE CMD...: run CMD in the background, its first line of stdout into FILE
	local f=$1 i
	shift
	"$@" >"$f.out" 2>"$f.err" &
	pids+=($!)
	for ((i = 0; i < 250; i++)); do
		if [ -s "$f.out" ] && read -r _ <"$f.out"; then
			cp "$f.out" "$f"
			return 0
		fi
		kill -0 "${pids[-1]}" 2>/dev/null || break
		sleep 0.02
	done
	echo "$* did not start:" >&2
	cat "$f.err" >&2
	exit 1
}
start_bg "$tmp/ports" "$eb" serve -tls
read -r port tlsport <"$tmp/ports"
start_bg "$tmp/relayport" "$eb" relay "127.0.0.1:$port"
read -r relayport <"$tmp/relayport"
url=http://127.0.0.1:$port
tlsurl=https://127.0.0.1:$tlsport

cat >"$tmp/moat.toml" <<EOF
[network]
mode = "allow"
allow = ["example.com"]
allow_cidrs = ["127.0.0.1/32"]
EOF
srt_settings() { # srt_settings FILE DOMAINS-JSON
	printf '{"network": {"allowedDomains": %s, "deniedDomains": []},\n "filesystem": {"denyRead": [], "allowWrite": ["%s"], "denyWrite": []}}\n' "$2" "$ws" >"$1"
}
srt_settings "$tmp/srt.json" "[\"example.com\", \"127.0.0.1:$port\", \"localhost:$port\", \"127.0.0.1:$tlsport\"]"
srt_settings "$tmp/srt-block.json" "[]"

moatrun=("$moat" run --policy "$tmp/moat.toml" --workspace "$ws" --)
srtrun=(srt --settings "$tmp/srt.json" --)

if [ -z "$srt_why" ] && ! out=$(indir "$ws" timeout 60 "${srtrun[@]}" /bin/true 2>&1); then
	srt_why="srt --settings FILE -- /bin/true failed here: $(printf '%s' "$out" | tail -n 2 | tr '\n' ' ')"
fi
have_srt=yes
if [ -n "$srt_why" ]; then
	have_srt=no
	echo "-- leaving out srt's rows: $srt_why" >&2
fi
echo "== moat $(git -C "$repo" describe --always --dirty 2>/dev/null || echo '(no git)'); $(go version | cut -d' ' -f3); $(curl --version | head -n 1 | cut -d' ' -f1-2)$(
	[ "$have_srt" = yes ] && printf '; srt %s; %s; %s' "$(srt --version 2>/dev/null)" "$(bwrap --version 2>/dev/null)" "$(socat -V 2>/dev/null | sed -n 's/^socat version \([^ ]*\).*/socat \1/p')")"
echo "== servers on 127.0.0.1: http :$port, https :$tlsport, bare relay :$relayport"

failed=() cmd=()
fail_variant() { # fail_variant NAME LABEL ERRFILE
	if [ ! -e "$tmp/$1.failed" ]; then
		touch "$tmp/$1.failed"
		failed+=("$1")
		echo "-- $2 failed; leaving out its numbers:" >&2
		sed 's/^/   /' "$3" >&2
	fi
}

# --- throughput ----------------------------------------------------------------
# The curl run inside a sandbox: through $HTTP_PROXY whatever NO_PROXY says.
incurl() { # incurl [CURL-OPTIONS...] URL: the sh -c script
	# shellcheck disable=SC2016 # $HTTP_PROXY is expanded inside the sandbox
	printf 'unset NO_PROXY no_proxy; exec curl -sS -f --noproxy "" -x "$HTTP_PROXY" -o /dev/null -w "%%{size_download} %%{speed_download}\\n"'
	printf ' %q' "$@"
}
dl_cmd() { # dl_cmd NAME: cmd = the command of one 1 GiB download, printing "BYTES BYTES_PER_S"
	local w='%{size_download} %{speed_download}\n'
	case $1 in
	direct) cmd=(curl -sS -f -o /dev/null -w "$w" "$url/1g") ;;
	relay) cmd=(curl -sS -f -o /dev/null -w "$w" "http://127.0.0.1:$relayport/1g") ;;
	moat) cmd=("${moatrun[@]}" sh -c "$(incurl "$url/1g")") ;;
	moat_connect) cmd=("${moatrun[@]}" sh -c "$(incurl -p "$url/1g")") ;;
	https) cmd=(curl -sS -f -k -o /dev/null -w "$w" "$tlsurl/1g") ;;
	moat_https) cmd=("${moatrun[@]}" sh -c "$(incurl -k "$tlsurl/1g")") ;;
	srt) cmd=("${srtrun[@]}" sh -c "$(incurl "$url/1g")") ;;
	srt_connect) cmd=("${srtrun[@]}" sh -c "$(incurl -p "$url/1g")") ;;
	esac
}
declare -A label=(
	[direct]="direct (curl on the host)"
	[relay]="bare TCP relay, host (ref.)"
	[moat]="moat, HTTP proxy"
	[moat_connect]="moat, CONNECT tunnel"
	[https]="direct HTTPS (curl -k)"
	[moat_https]="moat, HTTPS via CONNECT"
	[srt]="srt, HTTP proxy"
	[srt_connect]="srt, CONNECT tunnel"
)
tput_names=(direct relay moat moat_connect https moat_https)
[ "$have_srt" = yes ] && tput_names+=(srt srt_connect)

echo "== throughput: $REPS x 1 GiB per variant ..."
for ((r = 0; r < REPS; r++)); do
	for name in "${tput_names[@]}"; do
		[ -e "$tmp/$name.failed" ] && continue
		dl_cmd "$name"
		if ! out=$(indir "$ws" timeout 120 "${cmd[@]}" 2>"$tmp/$name.err"); then
			fail_variant "$name" "${label[$name]}" "$tmp/$name.err"
			continue
		fi
		read -r bytes speed <<<"$(tail -n 1 <<<"$out")"
		if [ "${bytes:-0}" != 1073741824 ]; then
			echo "downloaded ${bytes:-nothing} bytes, not 1073741824; output: $out" >>"$tmp/$name.err"
			fail_variant "$name" "${label[$name]}" "$tmp/$name.err"
			continue
		fi
		awk -v s="$speed" 'BEGIN { printf "%.1f\n", s / 1e6 }' >>"$tmp/$name.mbs"
	done
done
declare -A mbs
for name in "${tput_names[@]}"; do
	if [ ! -s "$tmp/$name.mbs" ] || [ -e "$tmp/$name.failed" ]; then continue; fi
	read -r m _ <<<"$("$timeit" -stats "$tmp/$name.mbs")"
	mbs[$name]=$m
done

# --- latency per new connection --------------------------------------------------
conns_cmd() { # conns_cmd NAME N: cmd = N timed requests, printing one time (ms) per line
	local c=(./egressbench conns -raw -n "$2")
	case $1 in
	direct) cmd=("${c[@]}" "$url/small") ;;
	relay) cmd=("${c[@]}" "http://127.0.0.1:$relayport/small") ;;
	moat) cmd=("${moatrun[@]}" "${c[@]}" -proxy env "$url/small") ;;
	moat_connect) cmd=("${moatrun[@]}" "${c[@]}" -proxy env -connect "$url/small") ;;
	srt) cmd=("${srtrun[@]}" "${c[@]}" -proxy env "$url/small") ;;
	srt_connect) cmd=("${srtrun[@]}" "${c[@]}" -proxy env -connect "$url/small") ;;
	esac
}
lat_names=(direct relay moat moat_connect)
[ "$have_srt" = yes ] && lat_names+=(srt srt_connect)
echo "== latency: $CONNS new connections per variant ..."
rounds=$((ROUNDS > CONNS ? CONNS : ROUNDS))
for ((r = 0; r < rounds; r++)); do
	n=$((CONNS / rounds + (r < CONNS % rounds ? 1 : 0)))
	for name in "${lat_names[@]}"; do
		[ -e "$tmp/$name.failed" ] && continue
		conns_cmd "$name" "$n"
		if ! indir "$ws" timeout 120 "${cmd[@]}" >>"$tmp/$name.lat" 2>"$tmp/$name.err"; then
			fail_variant "$name" "${label[$name]}" "$tmp/$name.err"
		fi
	done
done
declare -A lat
for name in "${lat_names[@]}"; do
	if [ ! -s "$tmp/$name.lat" ] || [ -e "$tmp/$name.failed" ]; then continue; fi
	read -r m _ <<<"$("$timeit" -stats "$tmp/$name.lat")"
	lat[$name]=$m
done

# --- start-up ------------------------------------------------------------------
declare -A su_cmd su_n
su_cmd[moat_none]="$moat run --net none -- /bin/true"
su_cmd[moat_allow]="$moat run --net allow:example.com -- /bin/true"
su_n[moat_none]=$N su_n[moat_allow]=$N
su_names=(moat_none moat_allow)
if [ "$have_srt" = yes ]; then
	su_cmd[srt_block]="srt --settings $tmp/srt-block.json -- /bin/true"
	su_cmd[srt_allow]="srt --settings $tmp/srt.json -- /bin/true"
	su_n[srt_block]=$SRT_N su_n[srt_allow]=$SRT_N
	su_names+=(srt_block srt_allow)
fi
label[moat_none]="moat run --net none"
label[moat_allow]="moat run --net allow:example.com"
label[srt_block]="srt, allowedDomains []"
label[srt_allow]="srt, the allowlist"
echo "== start-up: /bin/true, $N (moat)$([ "$have_srt" = yes ] && printf ' / %s (srt)' "$SRT_N") runs per variant ..."
for ((r = 0; r < ROUNDS; r++)); do
	for name in "${su_names[@]}"; do
		[ -e "$tmp/$name.failed" ] && continue
		total=${su_n[$name]}
		rr=$((ROUNDS > total ? total : ROUNDS))
		[ "$r" -lt "$rr" ] || continue
		n=$((total / rr + (r < total % rr ? 1 : 0)))
		read -ra cmd <<<"${su_cmd[$name]}"
		if ! indir "$ws" timeout $((60 + n)) "$timeit" -raw -warmup 2 -n "$n" -- "${cmd[@]}" >>"$tmp/$name.su" 2>"$tmp/$name.err"; then
			fail_variant "$name" "${label[$name]}" "$tmp/$name.err"
		fi
	done
done
declare -A su
for name in "${su_names[@]}"; do
	if [ ! -s "$tmp/$name.su" ] || [ -e "$tmp/$name.failed" ]; then continue; fi
	read -r m _ <<<"$("$timeit" -stats "$tmp/$name.su")"
	su[$name]=$m
done

# --- table ---------------------------------------------------------------------
# ratio_to A B: "A/Bx"; added A B: A-B signed; n/a when either is not a number
isnum() { [[ ${1:-} =~ ^[+-]?[0-9]+(\.[0-9]*)?$ ]]; }
ratio_to() {
	if isnum "${1:-}" && isnum "${2:-}" && awk -v b="$2" 'BEGIN { exit !(b != 0) }'; then
		awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'
	else printf 'n/a'; fi
}
added() {
	if isnum "${1:-}" && isnum "${2:-}"; then awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.2f", a - b }'; else printf 'n/a'; fi
}
cell() { if [ -n "${1:-}" ]; then printf '%s' "$1"; else printf 'n/a'; fi; }

row() { # row NAME MBS RATIO ADDED STARTUP
	printf '%-32s | %8s | %15s | %13s | %17s\n' "${label[$1]}" "$2" "$3" "$4" "$5"
}
mbs_cell() { if [ -n "${mbs[$1]:-}" ]; then printf '%.0f' "${mbs[$1]}"; else printf 'n/a'; fi; }
extra_moat=$(added "${su[moat_allow]:-}" "${su[moat_none]:-}")
extra_srt=$(added "${su[srt_allow]:-}" "${su[srt_block]:-}")

echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '%-32s | %8s | %15s | %13s | %17s\n' variant "MB/s" "ratio to direct" "added ms/conn" "start-up extra ms"
printf '%-32s-|-%8s-|-%15s-|-%13s-|-%17s\n' -------------------------------- -------- --------------- ------------- -----------------
for name in direct relay moat moat_connect https moat_https srt srt_connect; do
	case $name in srt*) [ "$have_srt" = yes ] || continue ;; esac
	r='-' a='-' s='-'
	case $name in
	direct) r=$(ratio_to "${mbs[direct]:-}" "${mbs[direct]:-}"); a="0 (base)" ;;
	https) r=$(ratio_to "${mbs[https]:-}" "${mbs[direct]:-}") ;;
	moat_https) r="$(ratio_to "${mbs[moat_https]:-}" "${mbs[https]:-}") HTTPS" ;;
	*) r=$(ratio_to "${mbs[$name]:-}" "${mbs[direct]:-}") ;;
	esac
	case $name in direct | https) ;; moat_https) ;; *) a=$(added "${lat[$name]:-}" "${lat[direct]:-}") ;; esac
	case $name in moat) s=$extra_moat ;; srt) s=$extra_srt ;; esac
	row "$name" "$(mbs_cell "$name")" "$r" "$a" "$s"
done
echo
medians() { # medians ARRAY-NAME NAME...: "name value, name value"
	local -n m=$1
	local n sep=''
	shift
	for n in "$@"; do
		printf '%s%s %s' "$sep" "$n" "$(cell "${m[$n]:-}")"
		sep=', '
	done
}
echo "per-connection medians (ms): $(medians lat "${lat_names[@]}")"
echo "start-up medians (ms): $(medians su "${su_names[@]}")"
[ "$have_srt" = yes ] && echo "(srt has no network-off mode: allowedDomains is required and its proxies start even for [], its way to block all; its extra is the allowlist over [])"

goal() { # goal VALUE OP LIMIT: met / NOT met / n/a
	case $1 in '' | n/a | *[!0-9.+x-]*) printf 'n/a'; return ;; esac
	if awk -v v="${1%x}" -v l="$3" "BEGIN { exit !(v $2 l) }"; then printf 'met'; else printf 'NOT met'; fi
}
tr_moat=$(ratio_to "${mbs[moat]:-}" "${mbs[direct]:-}")
tr_conn=$(ratio_to "${mbs[moat_connect]:-}" "${mbs[direct]:-}")
tr_relay=$(ratio_to "${mbs[relay]:-}" "${mbs[direct]:-}")
ad_moat=$(added "${lat[moat]:-}" "${lat[direct]:-}")
echo
echo "moat throughput: HTTP proxy $tr_moat, CONNECT $tr_conn of direct (goal >= 0.8x): $(goal "$tr_moat" '>=' 0.8) / $(goal "$tr_conn" '>=' 0.8); a bare relay reaches $tr_relay here"
echo "moat added latency per new connection: $ad_moat ms (goal <= 1 ms): $(goal "$ad_moat" '<=' 1)"
echo "moat start-up extra of --net allow:example.com over --net none: $extra_moat ms (goal <= 5 ms): $(goal "$extra_moat" '<=' 5)"
if [ "$have_srt" = yes ]; then
	echo "moat vs srt: throughput $(ratio_to "${mbs[moat]:-}" "${mbs[srt]:-}") (HTTP proxy), $(ratio_to "${mbs[moat_connect]:-}" "${mbs[srt_connect]:-}") (CONNECT); added latency srt/moat $(ratio_to "$(added "${lat[srt]:-}" "${lat[direct]:-}")" "$ad_moat") (HTTP proxy); start-up srt/moat $(ratio_to "${su[srt_allow]:-}" "${su[moat_allow]:-}") with the allowlist"
else
	echo "srt: left out ($srt_why)"
fi
if [ "${#failed[@]}" -gt 0 ]; then
	echo
	echo "variants left out because they failed: ${failed[*]}"
fi
