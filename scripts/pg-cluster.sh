# shellcheck shell=bash
# Functions that start and stop a throwaway PostgreSQL cluster for the tests
# of plugins/postgres. Sourced by scripts/test.sh, scripts/pg-start.sh and
# scripts/pg-stop.sh; it does nothing by itself.
#
#   loom_pg_start   creates a cluster in a new temporary directory and starts
#                   it on 127.0.0.1 and a free port; sets LOOM_TEST_POSTGRES_DIR
#                   and LOOM_TEST_POSTGRES_DSN. Progress goes to stderr.
#   loom_pg_stop D  stops the cluster in directory D and removes D.
#
# The cluster: PostgreSQL's own initdb and pg_ctl (Debian's postgresql
# package, installed with apt-get when missing and this is root), UTF8 with
# the C locale, trust authentication for loopback TCP and the cluster's own
# Unix socket only (nothing listens beyond 127.0.0.1), fsync and
# synchronous_commit left on so the tests and benchmarks see real
# durability. initdb refuses to run as root, so as root the cluster runs as
# the unprivileged system user loompg (created when missing); otherwise it
# runs as the current user.

LOOM_PG_USER=loompg

# loom_pg_bindir prints the directory holding initdb and pg_ctl, installing
# PostgreSQL first when it is missing and this is root.
loom_pg_bindir() {
	local dir
	dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
	if [[ -z "$dir" || ! -x "$dir/initdb" ]]; then
		if [[ "$(id -u)" -ne 0 ]]; then
			echo "PostgreSQL server binaries are missing and this is not root: install them (apt-get install -y postgresql) and rerun" >&2
			return 1
		fi
		echo "== installing Debian's postgresql for the plugins/postgres tests" >&2
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
		dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
	fi
	[[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]] || { echo "initdb or pg_ctl not found under /usr/lib/postgresql" >&2; return 1; }
	echo "$dir"
}

# loom_pg_as runs a command as the cluster's owner: loompg when this is root,
# the current user otherwise.
loom_pg_as() {
	if [[ "$(id -u)" -eq 0 ]]; then
		runuser -u "$LOOM_PG_USER" -- "$@"
	else
		"$@"
	fi
}

# loom_pg_free_port asks the OS for a free TCP port on 127.0.0.1.
loom_pg_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()' 2>/dev/null ||
		echo $((20000 + RANDOM % 40000))
}

loom_pg_start() {
	local bin dir port attempt user
	bin="$(loom_pg_bindir)" || return 1
	if [[ "$(id -u)" -eq 0 ]] && ! id -u "$LOOM_PG_USER" >/dev/null 2>&1; then
		useradd --system --no-create-home --shell /usr/sbin/nologin "$LOOM_PG_USER"
	fi
	dir="$(mktemp -d "${TMPDIR:-/tmp}/loom-pg.XXXXXX")"
	user="$(id -un)"
	if [[ "$(id -u)" -eq 0 ]]; then
		chown "$LOOM_PG_USER" "$dir"
		user="$LOOM_PG_USER"
	fi
	if ! loom_pg_as "$bin/initdb" --pgdata="$dir/data" --username="$user" --auth=trust \
		--encoding=UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1; then
		cat "$dir/initdb.log" >&2
		rm -rf "$dir"
		return 1
	fi
	# Loopback only: the cluster's socket directory and 127.0.0.1.
	cat >"$dir/data/pg_hba.conf" <<-EOF
		local all all trust
		host  all all 127.0.0.1/32 trust
	EOF
	for attempt in 1 2 3 4 5; do
		port="$(loom_pg_free_port)"
		if loom_pg_as "$bin/pg_ctl" --pgdata="$dir/data" --log="$dir/server.log" --wait --timeout=60 \
			-o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=300 -c shared_buffers=128MB" \
			start >/dev/null; then
			break
		fi
		echo "pg_ctl start failed on port $port (attempt $attempt); retrying" >&2
		port=""
	done
	if [[ -z "$port" ]]; then
		cat "$dir/server.log" >&2
		rm -rf "$dir"
		return 1
	fi
	if ! loom_pg_as "$bin/createdb" --host="$dir" --port="$port" --username="$user" loom; then
		loom_pg_stop "$dir"
		return 1
	fi
	LOOM_TEST_POSTGRES_DIR="$dir"
	LOOM_TEST_POSTGRES_DSN="postgres://$user@127.0.0.1:$port/loom?sslmode=disable"
	export LOOM_TEST_POSTGRES_DIR LOOM_TEST_POSTGRES_DSN
	echo "== PostgreSQL $("$bin/pg_ctl" --version | awk '{print $3}') on 127.0.0.1:$port (data in $dir)" >&2
}

loom_pg_stop() {
	local dir="$1" bin pid
	[[ -n "$dir" && -d "$dir" ]] || return 0
	bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
	if [[ -f "$dir/data/postmaster.pid" ]]; then
		pid="$(head -n 1 "$dir/data/postmaster.pid")"
		# Immediate: the data is thrown away, so nothing needs a clean
		# shutdown. If pg_ctl cannot stop it, the postmaster is killed so no
		# server outlives its data directory.
		if ! loom_pg_as "$bin/pg_ctl" --pgdata="$dir/data" --mode=immediate --wait stop >/dev/null 2>&1; then
			echo "pg_ctl stop failed; killing postmaster $pid" >&2
			kill -KILL "$pid" 2>/dev/null
		fi
	fi
	rm -rf "$dir"
}
