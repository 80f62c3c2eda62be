#!/usr/bin/env bash
# Kafka + FerretDB (over PostgreSQL) for tests, CI and local development, on loopback, no Docker.
#
#   eval "$(bash infra/engines/engines.sh up)"   install if needed, start both, export their addresses
#   bash infra/engines/engines.sh env            print the export lines of running engines
#   bash infra/engines/engines.sh status         say what runs (exit 3 if something does not)
#   bash infra/engines/engines.sh down           stop all of them (either backend) and delete their data
#   bash infra/engines/engines.sh install        only fetch/build/install (e.g. to warm a cache, or to add
#                                                what a cache from an older checkout lacks, such as the
#                                                kafka-tools jar of the console consumer; engines that
#                                                run are left alone)
#
# stdout carries only `export ...` lines; progress and errors go to stderr.
# `up` is idempotent: engines that already run are left alone.
# Ports: RELAY_KAFKA_PORT (19092), RELAY_KAFKA_CONTROLLER_PORT (19093),
#        RELAY_FERRETDB_PORT (27019; 27018 with sqlite), RELAY_POSTGRES_PORT (15432).
#        Cache: RELAY_ENGINES_CACHE (~/.cache/relay-engines). See kafka.sh, ferretdb.sh and
#        postgres.sh for the rest.
# RELAY_FERRETDB_BACKEND (postgresql): which FerretDB `up`, `env`, `status` and `install` mean.
#        postgresql (postgres.sh installs PostgreSQL when missing; as root with apt-get, Debian's
#        package) is 3–8× faster than sqlite here (README.md, Performance), so CI uses it; sqlite
#        runs on its own port and run directory, next to it if both are started. `down` stops
#        both, so that nothing is left behind whichever was started; to stop only one:
#        RELAY_FERRETDB_BACKEND=<backend> bash ferretdb.sh stop.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"

# Database name in the URL the adapters get; tests may pick their own per run.
MONGODB_DB="${RELAY_MONGODB_DB:-relay}"
# ferretdb.sh reads the same variable with the same default; named here for the messages.
FERRETDB_BACKEND="${RELAY_FERRETDB_BACKEND:-postgresql}"
FERRETDB_BACKENDS=(postgresql sqlite)
[[ " ${FERRETDB_BACKENDS[*]} " == *" $FERRETDB_BACKEND "* ]] ||
  die "RELAY_FERRETDB_BACKEND must be postgresql or sqlite, got '$FERRETDB_BACKEND'"

print_env() {
  local kafka ferret
  kafka="$1"
  ferret="$2"
  printf 'export RELAY_KAFKA_BROKERS=%q\n' "$kafka"
  printf 'export RELAY_MONGODB_URL=%q\n' "${ferret%/}/$MONGODB_DB"
}

cmd_up() {
  local kafka ferret kafka_was_up=no
  bash "$here/kafka.sh" status >/dev/null 2>&1 && kafka_was_up=yes
  kafka="$(bash "$here/kafka.sh" start)"
  if ! ferret="$(bash "$here/ferretdb.sh" start)"; then
    # Half an environment is worse than none: callers would run against it.
    # A broker that was already up before this call is someone else's to stop.
    if [[ "$kafka_was_up" == no ]]; then
      bash "$here/kafka.sh" stop || true
      die "ferretdb ($FERRETDB_BACKEND) did not start; kafka stopped again"
    fi
    die "ferretdb ($FERRETDB_BACKEND) did not start"
  fi
  print_env "$kafka" "$ferret"
}

cmd_env() {
  local kafka ferret
  kafka="$(bash "$here/kafka.sh" status)" || die "kafka is not running (run: engines.sh up)"
  ferret="$(bash "$here/ferretdb.sh" status)" ||
    die "ferretdb ($FERRETDB_BACKEND backend) is not running (run: engines.sh up; RELAY_FERRETDB_BACKEND picks the backend)"
  print_env "$kafka" "$ferret"
}

cmd_status() {
  local rc=0
  bash "$here/kafka.sh" status >/dev/null || rc=3
  bash "$here/ferretdb.sh" status >/dev/null || rc=3
  return "$rc"
}

cmd_down() {
  local rc=0 backend
  # Both backends: a FerretDB started under another default or variable must not outlive `down`.
  # The postgresql one stops its PostgreSQL too.
  for backend in "${FERRETDB_BACKENDS[@]}"; do
    RELAY_FERRETDB_BACKEND="$backend" bash "$here/ferretdb.sh" stop || rc=1
  done
  bash "$here/kafka.sh" stop || rc=1
  return "$rc"
}

cmd_install() {
  bash "$here/kafka.sh" install
  bash "$here/ferretdb.sh" install
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  env) cmd_env ;;
  status) cmd_status ;;
  install) cmd_install ;;
  *)
    echo "usage: $0 up|down|env|status|install" >&2
    exit 2
    ;;
esac
