#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for running the plugins/postgres
# tests by hand (scripts/test.sh starts and removes its own). It prints the
# shell lines that point the tests at it:
#
#   eval "$(./scripts/pg-start.sh)"
#   go test -race -count=1 ./plugins/postgres/
#   ./scripts/pg-stop.sh            # stops it and removes its data
#
# The cluster listens on 127.0.0.1 only, on a free port, with trust
# authentication, in a new temporary directory (see scripts/pg-cluster.sh).
set -euo pipefail
# shellcheck source=scripts/pg-cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/pg-cluster.sh"
loom_pg_start
printf 'export LOOM_TEST_POSTGRES_DSN=%q\n' "$LOOM_TEST_POSTGRES_DSN"
printf 'export LOOM_TEST_POSTGRES_DIR=%q\n' "$LOOM_TEST_POSTGRES_DIR"
echo "# stop it with: ./scripts/pg-stop.sh (or ./scripts/pg-stop.sh $LOOM_TEST_POSTGRES_DIR)" >&2
