#!/usr/bin/env bash
# The test command of Loom. CI (.ci/run) and people run the same gates, in
# this order, and the first failure stops the run:
#   1. gofmt    every Go file is gofmt-formatted
#   2. go vet   on every package
#   3. go test  every package, with the race detector, uncached
# It works from any directory: it moves to the repository root first.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# ---- Services the tests need ----------------------------------------------
# PostgreSQL: a later issue starts a throwaway cluster here (initdb and pg_ctl
# in a temporary directory, as a non-root user), exports its address for the
# plugins/postgres tests and stops it on exit.
#
# Chromium: a later issue installs Debian's chromium here for the chromedp
# browser tests (never downloaded by the tool itself).

# ---- 1. gofmt --------------------------------------------------------------
echo "== gofmt -l ."
unformatted="$(gofmt -l .)"
if [[ -n "$unformatted" ]]; then
	echo "gofmt: these files are not formatted (run gofmt -w on them):" >&2
	echo "$unformatted" >&2
	exit 1
fi

# ---- 2. go vet -------------------------------------------------------------
echo "== go vet ./..."
go vet ./...

# ---- 3. go test ------------------------------------------------------------
echo "== go test -race -count=1 ./..."
go test -race -count=1 -timeout 60m ./...
