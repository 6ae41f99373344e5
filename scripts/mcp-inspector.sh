#!/usr/bin/env bash
# A third-party MCP client against a real moat: the MCP Inspector's CLI
# mode, from npm. It builds moat, then, over stdio (moat mcp) and over
# the daemon's streamable HTTP (moat serve, /mcp, a bearer token), lists
# the tools and calls run_command and read_file; it checks that a path
# out of the workspace and arguments that do not fit are error results,
# and that nothing is left behind. (The inspector refuses an unknown tool
# itself, before the server sees it; the Go tests cover that one.)
# Without node and npx it says so and skips (exit 0). MOAT_INSPECTOR
# names the npm package to run (default: a pinned version).
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0

if ! command -v node >/dev/null || ! command -v npx >/dev/null; then
  if [ "${MOAT_REQUIRE_INSPECTOR:-0}" = 1 ]; then
    echo "mcp-inspector: node and npx are required (MOAT_REQUIRE_INSPECTOR=1): apt-get install nodejs npm" >&2
    exit 1
  fi
  echo "== SKIPPED mcp-inspector: node and npx are not installed (the MCP Inspector is an npm package)"
  exit 0
fi
inspector="${MOAT_INSPECTOR:-@modelcontextprotocol/inspector@2.12.0}"

tmp=$(mktemp -d /tmp/moat-mcp-inspector.XXXXXX)
serve=
trap 'if [ -n "$serve" ]; then kill "$serve" 2>/dev/null; wait "$serve" 2>/dev/null; fi; rm -rf "$tmp"' EXIT
go build -ldflags=-E=_rt0_moat -o "$tmp/moat" ./cmd/moat
mkdir "$tmp/ws"
echo "hello from the workspace" >"$tmp/ws/hello.txt"
export MOAT_STATE_DIR="$tmp/state"

fail=0
# call ok|error EXPECT ARGS...: run the inspector against moat mcp; it
# must succeed (ok) or report an error result (error, a non-zero exit),
# and its output must contain EXPECT.
call() {
  local how="$1" want="$2"; shift 2
  local out status=0
  out=$(npx -y "$inspector" --cli "$tmp/moat" mcp --workspace "$tmp/ws" "$@" 2>&1) || status=$?
  if [ "$how" = ok ] && [ $status -ne 0 ]; then
    echo "FAIL: inspector $*: exit status $status"; echo "$out"; fail=1; return
  fi
  if [ "$how" = error ] && ! grep -qF '"isError": true' <<<"$out"; then
    echo "FAIL: inspector $*: not an error result"; echo "$out"; fail=1; return
  fi
  if ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: inspector $*: output lacks $want"; echo "$out"; fail=1; return
  fi
  echo "ok: $* -> $want"
}

start=$(date +%s)
call ok '"name": "run_command"' --method tools/list
call ok '"name": "session_info"' --method tools/list
call ok 'exit code: 3' --method tools/call --tool-name run_command --tool-arg 'command=cat hello.txt; exit 3'
call ok 'hello from the workspace' --method tools/call --tool-name run_command --tool-arg 'command=cat hello.txt'
call ok 'hello from the workspace' --method tools/call --tool-name read_file --tool-arg path=hello.txt
call error 'path escapes the workspace' --method tools/call --tool-name read_file --tool-arg path=../../etc/passwd
call error 'is outside the workspace' --method tools/call --tool-name read_file --tool-arg path=/etc/passwd
call error 'give command' --method tools/call --tool-name run_command

# The same server over streamable HTTP on the daemon (/mcp), a tenant by
# its bearer token.
token=mcp-inspector-$RANDOM$RANDOM
echo "ci sha256:$(printf %s "$token" | sha256sum | cut -d' ' -f1)" >"$tmp/tokens"
port=$((20000 + RANDOM % 30000))
"$tmp/moat" serve --socket "$tmp/moat.sock" --listen "127.0.0.1:$port" --tokens "$tmp/tokens" --log-level warn 2>"$tmp/serve.log" &
serve=$!
for _ in $(seq 50); do [ -S "$tmp/moat.sock" ] && break; sleep 0.1; done
http() {
  local want="$1"; shift
  local out
  out=$(npx -y "$inspector" --cli "http://127.0.0.1:$port/mcp" --transport http --header "Authorization: Bearer $token" "$@" 2>&1) || true
  if ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: inspector over HTTP $*: output lacks $want"; echo "$out"; cat "$tmp/serve.log"; fail=1; return
  fi
  echo "ok: HTTP $* -> $want"
}
http '"name": "run_command"' --method tools/list
http 'via http' --method tools/call --tool-name run_command --tool-arg 'command=echo via http'
kill -TERM "$serve"
wait "$serve" || { echo "FAIL: moat serve exited with $?"; cat "$tmp/serve.log"; fail=1; }
serve=
echo "== inspector calls took $(($(date +%s) - start))s"

if [ -n "$(ls -A "$MOAT_STATE_DIR/mcp" 2>/dev/null)" ]; then
  echo "FAIL: a server left state behind: $(ls "$MOAT_STATE_DIR/mcp")"; fail=1
fi
exit $fail
