#!/usr/bin/env bash
# Stops a cluster started by scripts/pg-start.sh and removes its data: the
# directory given as the argument, else $LOOM_TEST_POSTGRES_DIR.
set -euo pipefail
# shellcheck source=scripts/pg-cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/pg-cluster.sh"
dir="${1:-${LOOM_TEST_POSTGRES_DIR:-}}"
if [[ -z "$dir" ]]; then
	echo "usage: $0 DIR (or set LOOM_TEST_POSTGRES_DIR, as eval \"\$(./scripts/pg-start.sh)\" does)" >&2
	exit 2
fi
case "$(basename "$dir")" in
loom-pg.*) ;;
*)
	echo "$dir is not a cluster directory of scripts/pg-start.sh (loom-pg.*); refusing to remove it" >&2
	exit 2
	;;
esac
loom_pg_stop "$dir"
echo "stopped and removed $dir" >&2
