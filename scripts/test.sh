#!/usr/bin/env bash
# The test command of Loom. CI (.ci/run) and people run the same gates, in
# this order, and the first failure stops the run:
#   1. gofmt        every Go file is gofmt-formatted
#   2. go vet       on every package
#   3. staticcheck  on every package (honnef.co/go/tools, pinned below); any
#                   finding fails the run
#   4. loomvet      the determinism analyzer (cmd/loomvet) over examples/:
#                   any finding in an example flow fails the run
#   5. go test      every package, with the race detector, uncached
#   6. planted      the kernel's planted faults (build tag loom_planted,
#                   internal/planted): the simulator must find each one
#   7. G2 overhead  bench/g2: an unwired capability may cost no more than
#                   1.25x its lightest wiring (median of paired CPU times)
# It works from any directory: it moves to the repository root first.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# ---- Services the tests need ----------------------------------------------
# PostgreSQL: a throwaway cluster (scripts/pg-cluster.sh: initdb and pg_ctl in
# a temporary directory, as the unprivileged user loompg when run as root,
# on 127.0.0.1 and a free port, trust auth on loopback only) serves the
# plugins/postgres and bench tests, which read its address from LOOM_TEST_POSTGRES_DSN
# and fail (never skip) without it. It is stopped and removed on exit,
# whatever the outcome. PostgreSQL is installed with apt-get when missing.
# shellcheck source=scripts/pg-cluster.sh
source scripts/pg-cluster.sh
loom_pg_start
trap 'loom_pg_stop "$LOOM_TEST_POSTGRES_DIR"' EXIT
#
# Chromium: the inspector's browser tests (cmd/loom, through chromedp) drive
# Debian's chromium; it is installed here when missing — never downloaded by a
# Go tool. Installing needs root (CI and the development machines run as
# root); without chromium those tests fail and name this script.
if ! command -v chromium >/dev/null 2>&1; then
	echo "== installing Debian's chromium for the browser tests"
	if [[ "$(id -u)" -eq 0 ]]; then
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
	else
		echo "chromium is missing and this is not root: install it (apt-get install -y chromium) and rerun" >&2
		exit 1
	fi
fi

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

# ---- 3. staticcheck --------------------------------------------------------
# The pinned version is built from the Go module proxy by `go run` with the
# toolchain in use (cached in the Go build cache after the first run), so a
# fresh machine needs nothing installed beforehand and go.mod gains no
# dependency. v0.8.2 is the release that supports Go 1.26; bump it together
# with the go directive. Checks are staticcheck's defaults (no
# staticcheck.conf): fix the code rather than silence a check.
staticcheck_version=v0.8.2
echo "== staticcheck ./..."
if ! go run "honnef.co/go/tools/cmd/staticcheck@${staticcheck_version}" ./...; then
	echo "staticcheck failed (see above): fix its findings, or disable a check in staticcheck.conf with a written reason" >&2
	exit 1
fi

# ---- 4. loomvet ------------------------------------------------------------
echo "== loomvet ./examples/..."
if ! go run ./cmd/loomvet ./examples/...; then
	echo "loomvet found flow code that would not replay deterministically (see above): fix it, or annotate a vetted line with //loomvet:ok <reason>" >&2
	exit 1
fi

# ---- 5. go test ------------------------------------------------------------
echo "== go test -race -count=1 ./..."
go test -race -count=1 -timeout 60m ./...

# ---- 6. planted kernel faults ----------------------------------------------
# The same kernel with three bugs built in (docs/dst.md): the seeded
# simulator must find and shrink each within its default seed budget.
echo "== go test -race -tags loom_planted -run TestPlantedKernel ./dst/"
go test -race -count=1 -tags loom_planted -run TestPlantedKernel ./dst/

# ---- 7. the G2 overhead gate ------------------------------------------------
# Guardrail G2 (spec §1): unwired, a capability costs nothing. bench/g2 runs
# one flow with each capability unwired and wired as lightly as it can be,
# in pairs timed by the process's CPU time, and fails when the median
# unwired/wired ratio is over 1.25 (a stated, generous bound: a real cost
# on the unwired path shows as far more; machine noise stays well under).
echo "== go run ./bench/g2"
go run ./bench/g2
