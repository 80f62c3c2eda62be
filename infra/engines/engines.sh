#!/usr/bin/env bash
# Kafka + FerretDB for tests and local development, on loopback, no Docker.
#
#   eval "$(bash infra/engines/engines.sh up)"   install if needed, start both, export their addresses
#   bash infra/engines/engines.sh env            print the export lines of running engines
#   bash infra/engines/engines.sh status         say what runs (exit 3 if something does not)
#   bash infra/engines/engines.sh down           stop both and delete their data
#   bash infra/engines/engines.sh install        only fetch/build (e.g. to warm a cache)
#
# stdout carries only `export ...` lines; progress and errors go to stderr.
# `up` is idempotent: engines that already run are left alone.
# Ports: RELAY_KAFKA_PORT (19092), RELAY_KAFKA_CONTROLLER_PORT (19093),
#        RELAY_FERRETDB_PORT (27018). Cache: RELAY_ENGINES_CACHE
#        (~/.cache/relay-engines). See kafka.sh and ferretdb.sh for the rest.
# RELAY_FERRETDB_BACKEND=postgresql: FerretDB over PostgreSQL (postgres.sh; port 27019, its own
#        run directory) instead of the SQLite one, which may run at the same time; for
#        comparisons, see README.md. `down` with it stops Kafka too; to stop only that FerretDB
#        and its PostgreSQL: RELAY_FERRETDB_BACKEND=postgresql bash ferretdb.sh stop.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"

# Database name in the URL the adapters get; tests may pick their own per run.
MONGODB_DB="${RELAY_MONGODB_DB:-relay}"

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
      die "ferretdb did not start; kafka stopped again"
    fi
    die "ferretdb did not start"
  fi
  print_env "$kafka" "$ferret"
}

cmd_env() {
  local kafka ferret
  kafka="$(bash "$here/kafka.sh" status)" || die "kafka is not running (run: engines.sh up)"
  ferret="$(bash "$here/ferretdb.sh" status)" || die "ferretdb is not running (run: engines.sh up)"
  print_env "$kafka" "$ferret"
}

cmd_status() {
  local rc=0
  bash "$here/kafka.sh" status >/dev/null || rc=3
  bash "$here/ferretdb.sh" status >/dev/null || rc=3
  return "$rc"
}

cmd_down() {
  local rc=0
  bash "$here/ferretdb.sh" stop || rc=1
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
