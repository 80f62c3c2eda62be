#!/usr/bin/env bash
# PostgreSQL on loopback, from the machine's own packages, as the backend of FerretDB
# (ferretdb.sh start, with its default RELAY_FERRETDB_BACKEND=postgresql, starts this first).
#
#   postgres.sh install   check that the server binaries are there; when they are not and we are
#                         root on a machine with apt-get (a fresh Debian CI machine), install
#                         Debian's postgresql package
#   postgres.sh start     initdb a fresh cluster, start it, create database ferretdb, print its URL
#   postgres.sh stop      stop it and delete its data
#   postgres.sh status    print the URL and exit 0 if running, else exit 3
#   postgres.sh logs      print the path of the server log
#
# Env: RELAY_POSTGRES_PORT (15432), RELAY_POSTGRES_BIN (directory of initdb and postgres;
#      default: the newest /usr/lib/postgresql/*/bin, else `pg_config --bindir`),
#      RELAY_POSTGRES_START_TIMEOUT seconds (30), RELAY_ENGINES_CACHE, RELAY_ENGINES_RUN.
#
# PostgreSQL refuses to run as root. Started by root, the server runs as the `postgres` user
# (the package makes it) and keeps its data in a private directory under ${TMPDIR:-/tmp},
# since that user cannot enter root's home; the run directory records where.
# Durability is PostgreSQL's default (fsync, synchronous_commit on), as FerretDB's SQLite
# backend syncs every commit too: the comparison is like for like.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

POSTGRES_PORT="${RELAY_POSTGRES_PORT:-15432}"
POSTGRES_START_TIMEOUT="${RELAY_POSTGRES_START_TIMEOUT:-30}"
POSTGRES_DATABASE=ferretdb
POSTGRES_SUPERUSER=postgres

POSTGRES_RUN="$ENGINES_RUN/postgres"
POSTGRES_PIDFILE="$POSTGRES_RUN/postgres.pid"
POSTGRES_PORTFILE="$POSTGRES_RUN/port"
POSTGRES_DATAFILE="$POSTGRES_RUN/datadir"
POSTGRES_LOG="$POSTGRES_RUN/postgres.log"

postgres_bin() {
  if [[ -n "${RELAY_POSTGRES_BIN:-}" ]]; then
    printf '%s\n' "$RELAY_POSTGRES_BIN"
    return
  fi
  local newest
  newest="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -type d -name bin 2>/dev/null | sort -V | tail -n 1)"
  if [[ -n "$newest" ]]; then
    printf '%s\n' "$newest"
  elif command -v pg_config >/dev/null 2>&1; then
    pg_config --bindir
  fi
}

POSTGRES_BIN="$(postgres_bin)"

# Runs "$@" as the user the server runs as (see the header).
as_server_user() {
  if [[ "$EUID" -eq 0 ]]; then
    setpriv "--reuid=$POSTGRES_SUPERUSER" "--regid=$POSTGRES_SUPERUSER" --init-groups -- "$@"
  else
    "$@"
  fi
}

has_server_binaries() { [[ -n "$POSTGRES_BIN" && -x "$POSTGRES_BIN/initdb" && -x "$POSTGRES_BIN/postgres" ]]; }

# Done only as root with apt-get (a fresh Debian CI machine); elsewhere it says what to install.
install_package() {
  local how="install PostgreSQL's server (Debian/Ubuntu: apt-get install postgresql), or set RELAY_POSTGRES_BIN to the directory of its initdb and postgres"
  [[ "$EUID" -eq 0 ]] || die "PostgreSQL server binaries not found (they are installed automatically only when running as root): $how"
  command -v apt-get >/dev/null 2>&1 || die "PostgreSQL server binaries not found, and there is no apt-get to install them: $how"
  log "PostgreSQL server binaries not found; installing Debian's postgresql package with apt-get"
  # stdout goes to stderr too: this script's stdout carries only the URL. The lock timeout waits
  # for a boot-time unattended-upgrades instead of failing on a fresh machine.
  local apt=(apt-get -q -o DPkg::Lock::Timeout=300)
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" update >&2 || die "apt-get update failed; $how"
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends postgresql >&2 ||
    die "apt-get install postgresql failed; $how"
  POSTGRES_BIN="$(postgres_bin)"
  has_server_binaries || die "installed the postgresql package, but found no initdb and postgres under /usr/lib/postgresql/*/bin or pg_config --bindir"
}

cmd_install() {
  if ! has_server_binaries; then
    # The package would not put them where someone pointed us.
    [[ -z "${RELAY_POSTGRES_BIN:-}" ]] ||
      die "no initdb and postgres in RELAY_POSTGRES_BIN=$RELAY_POSTGRES_BIN (point it at PostgreSQL's bin directory, or unset it to use the installed or Debian's package)"
    install_package
  fi
  if [[ "$EUID" -eq 0 ]]; then
    need_cmd setpriv "part of util-linux; runs the server as the postgres user"
    id "$POSTGRES_SUPERUSER" >/dev/null 2>&1 || die "running as root needs a '$POSTGRES_SUPERUSER' user to run the server as (the postgresql package makes it)"
  fi
  log "postgresql: $("$POSTGRES_BIN/postgres" --version)"
}

data_dir() { [[ -s "$POSTGRES_DATAFILE" ]] && cat "$POSTGRES_DATAFILE"; }

# The server's command line names its data directory, and nobody else's does.
running_pid() {
  local data
  data="$(data_dir)" || return 1
  live_pid "$POSTGRES_PIDFILE" "-D $data"
}

print_url() { printf 'postgres://%s@127.0.0.1:%s/%s\n' "$POSTGRES_SUPERUSER" "$(<"$POSTGRES_PORTFILE")" "$POSTGRES_DATABASE"; }

remove_data() {
  local data
  if data="$(data_dir)"; then
    rm -rf "$data"
    # The private parent made for root (see new_data_dir).
    if [[ "$(basename "$(dirname "$data")")" == relay-engines-postgres.* ]]; then rmdir "$(dirname "$data")" 2>/dev/null || true; fi
  fi
  rm -f "$POSTGRES_DATAFILE"
}

new_data_dir() {
  local data
  if [[ "$EUID" -eq 0 ]]; then
    local parent
    parent="$(mktemp -d "${TMPDIR:-/tmp}/relay-engines-postgres.XXXXXX")"
    chmod 0755 "$parent"
    data="$parent/data"
    mkdir -m 0700 "$data"
    chown "$POSTGRES_SUPERUSER:" "$data"
  else
    data="$POSTGRES_RUN/data"
    mkdir -m 0700 "$data"
  fi
  printf '%s\n' "$data" >"$POSTGRES_DATAFILE"
  printf '%s\n' "$data"
}

cmd_start() {
  check_port_number RELAY_POSTGRES_PORT "$POSTGRES_PORT"
  if running_pid >/dev/null; then
    log "postgresql already running (pid $(running_pid))"
    print_url
    return 0
  fi
  cmd_install
  port_open "$POSTGRES_PORT" && die "port $POSTGRES_PORT is already in use on 127.0.0.1 (set RELAY_POSTGRES_PORT)"
  remove_data
  rm -rf "$POSTGRES_RUN"
  mkdir -p "$POSTGRES_RUN"
  printf '%s\n' "$POSTGRES_PORT" >"$POSTGRES_PORTFILE"
  local data
  data="$(new_data_dir)"

  log "initdb $data"
  # trust: loopback only, a throwaway cluster for tests and measurements.
  if ! as_server_user "$POSTGRES_BIN/initdb" -D "$data" -U "$POSTGRES_SUPERUSER" --auth=trust -E UTF8 --no-instructions >"$POSTGRES_RUN/initdb.log" 2>&1; then
    show_log_tail "$POSTGRES_RUN/initdb.log"
    remove_data
    die "initdb failed"
  fi

  trap 'stop_server; exit 130' INT TERM HUP
  log "starting postgresql on 127.0.0.1:$POSTGRES_PORT"
  # No Unix socket (-k ''): loopback TCP only, so parallel clusters cannot collide on /var/run.
  local as_user=()
  [[ "$EUID" -eq 0 ]] && as_user=(setpriv "--reuid=$POSTGRES_SUPERUSER" "--regid=$POSTGRES_SUPERUSER" --init-groups --)
  spawn "$POSTGRES_PIDFILE" "$POSTGRES_LOG" "${as_user[@]}" "$POSTGRES_BIN/postgres" -D "$data" \
    -h 127.0.0.1 -p "$POSTGRES_PORT" -k '' -c max_connections=200

  local deadline=$((SECONDS + POSTGRES_START_TIMEOUT)) pid
  pid="$(<"$POSTGRES_PIDFILE")"
  while :; do
    if ! pid_alive "$pid"; then
      show_log_tail "$POSTGRES_LOG"
      rm -f "$POSTGRES_PIDFILE"
      remove_data
      die "postgresql exited during startup"
    fi
    "$POSTGRES_BIN/pg_isready" -q -h 127.0.0.1 -p "$POSTGRES_PORT" && break
    if ((SECONDS >= deadline)); then
      show_log_tail "$POSTGRES_LOG"
      stop_server
      die "postgresql was not ready within ${POSTGRES_START_TIMEOUT}s"
    fi
    sleep 0.2
  done
  "$POSTGRES_BIN/createdb" -h 127.0.0.1 -p "$POSTGRES_PORT" -U "$POSTGRES_SUPERUSER" "$POSTGRES_DATABASE" >>"$POSTGRES_LOG" 2>&1 ||
    { stop_server; die "could not create database $POSTGRES_DATABASE"; }
  trap - INT TERM HUP
  log "postgresql ready (pid $pid, log $POSTGRES_LOG)"
  print_url
}

# SIGINT is PostgreSQL's fast shutdown; the SIGTERM stop_pid sends first is a smart one, which
# waits for every client (FerretDB keeps a pool open) to leave.
stop_server() {
  local pid i
  if pid="$(running_pid)"; then
    log "stopping postgresql (pid $pid)"
    kill -INT "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      pid_alive "$pid" || break
      sleep 0.1
    done
  fi
  local data
  if data="$(data_dir)"; then stop_pid "$POSTGRES_PIDFILE" "-D $data" 5; fi
  rm -f "$POSTGRES_PIDFILE"
}

cmd_stop() {
  stop_server
  remove_data
}

cmd_status() {
  local pid
  if pid="$(running_pid)"; then
    log "postgresql running (pid $pid)"
    print_url
  else
    log "postgresql not running"
    return 3
  fi
}

case "${1:-}" in
  install | start | stop | restart) take_lock postgres ;;
esac

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  restart) cmd_stop; cmd_start ;;
  status) cmd_status ;;
  logs) printf '%s\n' "$POSTGRES_LOG" ;;
  *)
    echo "usage: $0 install|start|stop|restart|status|logs" >&2
    exit 2
    ;;
esac
