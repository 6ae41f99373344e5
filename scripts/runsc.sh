#!/usr/bin/env bash
# Builds gVisor's runsc, the runtime of `moat run --isolation gvisor`, from
# its Go module at a pinned version, into a cache directory that outlives a
# checkout: ${XDG_CACHE_HOME:-$HOME/.cache}/moat/runsc-VERSION/runsc, the
# path moat itself looks in (after [sandbox] runsc and $MOAT_RUNSC, before
# PATH). A second call finds the binary there and builds nothing. Prints
# the binary's path on stdout; build output goes to stderr.
#
# MOAT_RUNSC_VERSION overrides the pinned version (a pseudo-version of
# gVisor's "go" branch, the one that builds with the go tool).
set -euo pipefail
version="${MOAT_RUNSC_VERSION:-v0.0.0-20260905035102-160fafc42237}"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/moat/runsc-$version"
if [ -x "$dir/runsc" ]; then
	echo "$dir/runsc"
	exit 0
fi
mkdir -p "$dir"
# Built into a temporary directory beside the cache entry and renamed,
# so that an interrupted build never leaves a half-written binary where
# moat looks.
tmp=$(mktemp -d "$dir.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
# runsc must be static: gVisor's sentry and gofer run with no dynamic
# loader in reach.
(cd "$tmp" && CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-mod=mod go install "gvisor.dev/gvisor/runsc@$version") >&2
mv "$tmp/runsc" "$dir/runsc"
echo "runsc $version built in $(($(date +%s) - start)) s" >&2
echo "$dir/runsc"
