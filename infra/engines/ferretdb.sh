#!/usr/bin/env bash
# FerretDB v1 (MongoDB wire protocol over PostgreSQL, or over SQLite files) on loopback,
# built from source fetched through the Go module proxy (no Docker, no release binary).
#
#   ferretdb.sh install   build the binary into the cache (once; later a no-op), and with the
#                         postgresql backend install PostgreSQL if missing (postgres.sh install)
#   ferretdb.sh start     install if needed, start on an empty data dir, print the URL
#   ferretdb.sh stop      stop it and delete its data
#   ferretdb.sh halt      stop FerretDB alone and keep its data (and its PostgreSQL running)
#   ferretdb.sh resume    start a halted FerretDB again on its data
#   ferretdb.sh status    print the URL and exit 0 if running, else exit 3
#   ferretdb.sh logs      print the path of the server log
#
# Env: RELAY_FERRETDB_BACKEND (postgresql, over a PostgreSQL that postgres.sh starts with it and
#      stops after it; or sqlite: over SQLite files. Each backend has its own run directory and
#      port, so both may run at once), RELAY_FERRETDB_PORT (27019 with postgresql; 27018 with
#      sqlite), RELAY_FERRETDB_VERSION (v1.24.2),
#      RELAY_FERRETDB_START_TIMEOUT seconds (30), RELAY_ENGINES_CACHE, RELAY_ENGINES_RUN.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FERRETDB_MODULE="github.com/FerretDB/FerretDB"
# v1.24.2 is the last v1 release; v2 dropped the SQLite backend.
FERRETDB_VERSION="${RELAY_FERRETDB_VERSION:-v1.24.2}"
# PostgreSQL by default: 3–8× faster than SQLite here on every operation Relay makes (README.md,
# Performance), and not limited to one writer.
FERRETDB_BACKEND="${RELAY_FERRETDB_BACKEND:-postgresql}"
case "$FERRETDB_BACKEND" in
  sqlite) FERRETDB_PORT="${RELAY_FERRETDB_PORT:-27018}" FERRETDB_NAME=ferretdb ;;
  postgresql) FERRETDB_PORT="${RELAY_FERRETDB_PORT:-27019}" FERRETDB_NAME=ferretdb-postgresql ;;
  *) die "RELAY_FERRETDB_BACKEND must be sqlite or postgresql, got '$FERRETDB_BACKEND'" ;;
esac
FERRETDB_START_TIMEOUT="${RELAY_FERRETDB_START_TIMEOUT:-30}"

FERRETDB_HOME="$ENGINES_CACHE/ferretdb-$FERRETDB_VERSION"
FERRETDB_BIN="$FERRETDB_HOME/bin/ferretdb"

FERRETDB_RUN="$ENGINES_RUN/$FERRETDB_NAME"
FERRETDB_PIDFILE="$FERRETDB_RUN/ferretdb.pid"
FERRETDB_PORTFILE="$FERRETDB_RUN/port"
FERRETDB_LOG="$FERRETDB_RUN/ferretdb.log"
FERRETDB_DATA="$FERRETDB_RUN/data"
# Seen in /proc/<pid>/cmdline of our server and nobody else's.
FERRETDB_MARKER="--state-dir=$FERRETDB_RUN"

is_installed() {
  [[ -x "$FERRETDB_BIN" ]] || return 1
  # Captured first: `| grep -q` would close the pipe early, SIGPIPE the
  # binary and, under pipefail, fail the check at random.
  local out
  out="$("$FERRETDB_BIN" --version 2>/dev/null)" || return 1
  grep -qx "version: $FERRETDB_VERSION" <<<"$out"
}

cmd_install() {
  if is_installed; then
    log "ferretdb $FERRETDB_VERSION already installed in $FERRETDB_HOME"
    return 0
  fi
  need_cmd go "FerretDB is built from source with Go >= 1.24"
  mkdir -p "$FERRETDB_HOME"
  local buildlog="$FERRETDB_HOME/install.log" src="$FERRETDB_HOME/src.$$"
  # `go install module@version` cannot be used: it asks the proxy for the
  # module's version list (deprecation check), which our proxy refuses (403).
  # `go mod download` of an exact version works, and building inside the
  # module keeps FerretDB's own go.mod/go.sum pins.
  log "fetching $FERRETDB_MODULE@$FERRETDB_VERSION through the Go module proxy (log: $buildlog)"
  local dir
  if ! dir="$(cd / && go mod download -json "$FERRETDB_MODULE@$FERRETDB_VERSION" 2>"$buildlog" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')" || [[ -z "$dir" || ! -d "$dir" ]]; then
    show_log_tail "$buildlog" 20
    die "could not download $FERRETDB_MODULE@$FERRETDB_VERSION"
  fi
  rm -rf "$src"
  cp -R "$dir" "$src"
  chmod -R u+w "$src"
  # The module zip lacks the generated version.txt; without it the binary
  # reports "unknown", which is also what is_installed would then reject.
  printf '%s\n' "$FERRETDB_VERSION" >"$src/build/version/version.txt"
  log "building ferretdb (first time takes a minute or two)"
  # CGO off: the SQLite driver is pure Go, and a static binary needs no C toolchain.
  if ! (cd "$src" && CGO_ENABLED=0 go build -trimpath -o "$FERRETDB_HOME/bin/ferretdb.new" ./cmd/ferretdb) >>"$buildlog" 2>&1; then
    rm -rf "$src"
    show_log_tail "$buildlog" 30
    die "go build of ferretdb failed"
  fi
  rm -rf "$src"
  mv -f "$FERRETDB_HOME/bin/ferretdb.new" "$FERRETDB_BIN"
  is_installed || die "built $FERRETDB_BIN but it does not report version $FERRETDB_VERSION"
  log "ferretdb $FERRETDB_VERSION installed: $FERRETDB_BIN"
}

running_pid() { live_pid "$FERRETDB_PIDFILE" "$FERRETDB_MARKER"; }

print_url() { printf 'mongodb://127.0.0.1:%s/\n' "$(<"$FERRETDB_PORTFILE")"; }

cmd_start() {
  check_port_number RELAY_FERRETDB_PORT "$FERRETDB_PORT"
  if running_pid >/dev/null; then
    if [[ "$(<"$FERRETDB_PORTFILE")" != "$FERRETDB_PORT" ]]; then
      log "warning: ferretdb already runs on port $(<"$FERRETDB_PORTFILE"), not $FERRETDB_PORT"
    fi
    log "$FERRETDB_NAME already running (pid $(running_pid))"
    print_url
    return 0
  fi
  cmd_install
  port_open "$FERRETDB_PORT" && die "port $FERRETDB_PORT is already in use on 127.0.0.1 (set RELAY_FERRETDB_PORT)"

  rm -rf "$FERRETDB_RUN"
  mkdir -p "$FERRETDB_RUN" "$FERRETDB_DATA"
  printf '%s\n' "$FERRETDB_PORT" >"$FERRETDB_PORTFILE"

  local -a backend
  mapfile -t backend < <(backend_args)
  ((${#backend[@]} > 0)) || die "postgresql did not start"
  launch "${backend[@]}"
  print_url
}

# The backend flags of the configured backend; with postgresql, starts it first (or finds it
# running: a resumed FerretDB uses the same one). Left running if FerretDB then fails to
# start: `stop` (same variable) stops both.
backend_args() {
  if [[ "$FERRETDB_BACKEND" == postgresql ]]; then
    local pg_url
    pg_url="$(bash "$(dirname "${BASH_SOURCE[0]}")/postgres.sh" start)" || return 1
    printf '%s\n' --handler=postgresql "--postgresql-url=$pg_url"
  else
    printf '%s\n' --handler=sqlite "--sqlite-url=file:$FERRETDB_DATA/"
  fi
}

# Starts FerretDB with these backend flags and waits until it listens.
launch() {
  # An interrupted start must not leave a server behind.
  trap 'stop_pid "$FERRETDB_PIDFILE" "$FERRETDB_MARKER" 5; exit 130' INT TERM HUP
  log "starting ferretdb $FERRETDB_VERSION ($FERRETDB_BACKEND) on 127.0.0.1:$(<"$FERRETDB_PORTFILE")"
  # --debug-addr=- : the default debug listener (127.0.0.1:8088) would clash
  # between parallel instances and is not needed.
  spawn "$FERRETDB_PIDFILE" "$FERRETDB_LOG" "$FERRETDB_BIN" \
    "$@" \
    "--listen-addr=127.0.0.1:$(<"$FERRETDB_PORTFILE")" \
    "$FERRETDB_MARKER" \
    --debug-addr=- \
    --telemetry=disable \
    --log-level=INFO

  local deadline=$((SECONDS + FERRETDB_START_TIMEOUT)) pid
  pid="$(<"$FERRETDB_PIDFILE")"
  while :; do
    if ! pid_alive "$pid"; then
      show_log_tail "$FERRETDB_LOG"
      rm -f "$FERRETDB_PIDFILE"
      die "ferretdb exited during startup"
    fi
    # FerretDB opens its listener only after the backend is initialised.
    port_open "$(<"$FERRETDB_PORTFILE")" && break
    if ((SECONDS >= deadline)); then
      show_log_tail "$FERRETDB_LOG"
      stop_pid "$FERRETDB_PIDFILE" "$FERRETDB_MARKER" 5
      die "ferretdb was not ready within ${FERRETDB_START_TIMEOUT}s"
    fi
    sleep 0.2
  done
  trap - INT TERM HUP
  log "$FERRETDB_NAME ready (pid $pid, log $FERRETDB_LOG)"
}

cmd_halt() {
  running_pid >/dev/null || die "$FERRETDB_NAME is not running (nothing to halt)"
  log "halting $FERRETDB_NAME (pid $(running_pid)); its data stays"
  stop_pid "$FERRETDB_PIDFILE" "$FERRETDB_MARKER" 10
}

cmd_resume() {
  if running_pid >/dev/null; then
    log "$FERRETDB_NAME already running (pid $(running_pid))"
    print_url
    return 0
  fi
  [[ -d "$FERRETDB_DATA" && -s "$FERRETDB_PORTFILE" ]] || die "no halted $FERRETDB_NAME in $FERRETDB_RUN (start one first)"
  port_open "$(<"$FERRETDB_PORTFILE")" && die "port $(<"$FERRETDB_PORTFILE") is already in use on 127.0.0.1"
  local -a backend
  mapfile -t backend < <(backend_args)
  ((${#backend[@]} > 0)) || die "postgresql did not start"
  launch "${backend[@]}"
  print_url
}

cmd_stop() {
  if running_pid >/dev/null; then
    log "stopping $FERRETDB_NAME (pid $(running_pid))"
  fi
  stop_pid "$FERRETDB_PIDFILE" "$FERRETDB_MARKER" 10
  rm -rf "$FERRETDB_DATA"
  if [[ "$FERRETDB_BACKEND" == postgresql ]]; then bash "$(dirname "${BASH_SOURCE[0]}")/postgres.sh" stop; fi
}

cmd_status() {
  local pid
  if pid="$(running_pid)"; then
    log "$FERRETDB_NAME running (pid $pid)"
    print_url
  else
    log "$FERRETDB_NAME not running"
    return 3
  fi
}

case "${1:-}" in
  install | start | stop | restart | halt | resume) take_lock "$FERRETDB_NAME" ;;
esac

case "${1:-}" in
  install)
    cmd_install
    if [[ "$FERRETDB_BACKEND" == postgresql ]]; then bash "$(dirname "${BASH_SOURCE[0]}")/postgres.sh" install; fi
    ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  restart) cmd_stop; cmd_start ;;
  halt) cmd_halt ;;
  resume) cmd_resume ;;
  status) cmd_status ;;
  logs) printf '%s\n' "$FERRETDB_LOG" ;;
  *)
    echo "usage: $0 install|start|stop|restart|halt|resume|status|logs" >&2
    exit 2
    ;;
esac
