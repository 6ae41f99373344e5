#!/usr/bin/env bash
# The test command (README): checks and the whole test suite, with real
# sandboxes. Run as root it covers both paths: first as root, then the
# rootless path as an unprivileged user (MOAT_TEST_USER, default moatci,
# created if missing). Run as an ordinary user it covers the rootless path
# only, and says so. Packages run one at a time (-p 1): several tests
# measure limits in real time, and the machines have 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0   # moat is one static binary; init relies on it

echo "== gofmt, go vet, staticcheck"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then echo "not gofmt-ed:"; echo "$unformatted"; exit 1; fi
go vet ./...
GOOS=darwin go build ./... # the code must build on macOS too
GOOS=darwin go vet ./...
# and on arm64 Linux, where the direct start forks instead of sharing memory
GOARCH=arm64 go vet ./...
if ! command -v staticcheck >/dev/null; then
  go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
  gopath=$(go env GOPATH)
  export PATH="$PATH:$gopath/bin"
fi
staticcheck ./...

# runsc for the gvisor backend's tests, built once per machine (the cache
# outlives the checkout) and found there by moat and the tests, also by
# the QEMU guest's root steps, through its share of the host's root; as
# moatci those tests skip, saying why.
echo "== runsc (gVisor) for --isolation gvisor"
scripts/runsc.sh

if [ "$(id -u)" -ne 0 ]; then
  echo "== go test (as uid $(id -u): rootless path only; run as root to test both)"
  go test -p 1 -count=1 ./...
  echo "== a third-party MCP client (the MCP Inspector's CLI) against moat mcp"
  scripts/mcp-inspector.sh
  exit 0
fi

echo "== go test as root"
# The approvals page's browser test fails rather than skips without
# chromium (.ci/run installs it).
MOAT_REQUIRE_CHROMIUM=1 go test -p 1 -count=1 ./...
# The direct start forks its init on architectures without the clone
# trampoline (arm64); this runs that path here, on the sandbox suite. Once
# init runs, nothing depends on how it was started: the tests of the tools'
# everyday work, of budgets' clocks and of gVisor (which has no direct
# start) ran above and are left out here.
forkskip='CommonToolsWork|Budget|GVisor'
echo "== go test as root, the sandbox suite with the forked direct start"
MOAT_TEST_FORK_START=1 go test -p 1 -count=1 ./sandbox -skip "$forkskip"
echo "== a third-party MCP client (the MCP Inspector's CLI) against moat mcp"
scripts/mcp-inspector.sh

user="${MOAT_TEST_USER:-moatci}"
if ! id "$user" >/dev/null 2>&1; then
  useradd --create-home --shell /bin/bash "$user"
fi
echo "== go test as $user (rootless path)"
MOAT_TEST_USER="$user" go test -p 1 -count=1 -exec "$PWD/.ci/asuser" ./...
echo "== go test as $user, the sandbox suite with the forked direct start"
MOAT_TEST_FORK_START=1 MOAT_TEST_USER="$user" go test -p 1 -count=1 -exec "$PWD/.ci/asuser" ./sandbox -skip "$forkskip"

if [ "${MOAT_VMTEST:-1}" = 0 ]; then
  echo "== SKIPPED: the pure cgroup v2 guest (MOAT_VMTEST=0); v2 memory, pids and cpu limits are untested"
  exit 0
fi
echo "== go test in a QEMU guest: pure cgroup v2, Debian's stock kernel"
MOAT_TEST_USER="$user" scripts/vmtest.sh
