#!/usr/bin/env bash
# Single-node Apache Kafka (KRaft, combined broker+controller) on loopback,
# assembled from Apache's jars on Maven Central (no tarball, no Docker).
#
#   kafka.sh install   resolve the broker's jars, and kafka-tools' (kafka-console-consumer, for
#                      tests), into the cache (once each; later a no-op; a running broker is
#                      left alone: its own jars are only replaced when its pom changed)
#   kafka.sh start     install if needed (kafka-tools: a warning if it cannot be), start on
#                      fresh storage, print bootstrap address
#   kafka.sh stop      stop the broker and delete its data
#   kafka.sh halt      stop the broker and keep its data (a broker that went away)
#   kafka.sh resume    start a halted broker again on its data (topics, offsets kept)
#   kafka.sh status    print the bootstrap address and exit 0 if running, else exit 3
#   kafka.sh logs      print the path of the broker log
#
# Env: RELAY_KAFKA_PORT (19092), RELAY_KAFKA_CONTROLLER_PORT (19093),
#      RELAY_KAFKA_VERSION (3.9.2), RELAY_KAFKA_HEAP (512m),
#      RELAY_KAFKA_START_TIMEOUT seconds (90), RELAY_ENGINES_CACHE, RELAY_ENGINES_RUN.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KAFKA_VERSION="${RELAY_KAFKA_VERSION:-3.9.2}"
KAFKA_PORT="${RELAY_KAFKA_PORT:-19092}"
KAFKA_CONTROLLER_PORT="${RELAY_KAFKA_CONTROLLER_PORT:-19093}"
KAFKA_HEAP="${RELAY_KAFKA_HEAP:-512m}"
KAFKA_START_TIMEOUT="${RELAY_KAFKA_START_TIMEOUT:-90}"

KAFKA_POM="$ENGINES_DIR/kafka/pom.xml"
KAFKA_HOME="$ENGINES_CACHE/kafka-$KAFKA_VERSION"
KAFKA_LIB="$KAFKA_HOME/lib"
KAFKA_STAMP="$KAFKA_HOME/.installed"
# Kafka's command-line tools beside the broker's jars (their classpath: lib/* then tools/*),
# resolved from a pom of their own so that the broker's classpath stays as it is.
KAFKA_TOOLS_POM="$ENGINES_DIR/kafka/tools-pom.xml"
KAFKA_TOOLS="$KAFKA_HOME/tools"
KAFKA_TOOLS_STAMP="$KAFKA_HOME/.tools-installed"

KAFKA_RUN="$ENGINES_RUN/kafka"
KAFKA_PIDFILE="$KAFKA_RUN/kafka.pid"
KAFKA_PORTFILE="$KAFKA_RUN/port"
KAFKA_LOG="$KAFKA_RUN/kafka.log"
KAFKA_DATA="$KAFKA_RUN/data"
# Seen in /proc/<pid>/cmdline of our broker and nobody else's.
KAFKA_MARKER="$KAFKA_RUN/server.properties"

java_bin() {
  if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then
    printf '%s\n' "$JAVA_HOME/bin/java"
  else
    need_cmd java "Kafka needs a Java 17+ runtime, e.g. apt-get install openjdk-17-jre-headless"
    command -v java
  fi
}

pom_digest() {
  # The stamp records which pom (and version) the jars came from, so editing
  # the pom re-resolves instead of running on a stale classpath.
  { sha256sum "${1:-$KAFKA_POM}" | cut -d' ' -f1; echo "$KAFKA_VERSION"; } | sha256sum | cut -d' ' -f1
}

is_installed() {
  [[ -f "$KAFKA_STAMP" && "$(<"$KAFKA_STAMP")" == "$(pom_digest)" ]] &&
    compgen -G "$KAFKA_LIB/kafka_2.13-$KAFKA_VERSION.jar" >/dev/null
}

tools_installed() {
  [[ -f "$KAFKA_TOOLS_STAMP" && "$(<"$KAFKA_TOOLS_STAMP")" == "$(pom_digest "$KAFKA_TOOLS_POM")" ]] &&
    compgen -G "$KAFKA_TOOLS/kafka-tools-$KAFKA_VERSION.jar" >/dev/null
}

# Copies the runtime jars of the pom $1 (at KAFKA_VERSION) from Maven Central into the
# directory $2, as a whole: it appears only once every jar is there. $3 names the jar that must
# be among them, $4 what is resolved (for the messages).
resolve_into() {
  local pom="$1" dest="$2" expected="$3" what="$4"
  need_cmd mvn "Kafka's jars are resolved from Maven Central with Maven: apt-get install maven"
  java_bin >/dev/null
  mkdir -p "$KAFKA_HOME"
  local work="$KAFKA_HOME/resolve.$$" mvnlog="$KAFKA_HOME/install-$(basename "$dest").log"
  rm -rf "$work"
  mkdir -p "$work"
  # Resolve from a copy of the pom so Maven writes nothing into the repo.
  cp "$pom" "$work/pom.xml"
  log "resolving $what from Maven Central (log: $mvnlog)"
  if ! mvn -B -f "$work/pom.xml" -Dkafka.version="$KAFKA_VERSION" \
    dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$work/jars" >"$mvnlog" 2>&1; then
    rm -rf "$work"
    show_log_tail "$mvnlog" 30
    die "maven could not resolve $what"
  fi
  [[ -f "$work/jars/$expected" ]] || {
    rm -rf "$work"
    die "maven finished but $expected is missing (log: $mvnlog)"
  }
  rm -rf "$dest"
  mv "$work/jars" "$dest"
  rm -rf "$work"
}

install_broker() {
  if is_installed; then
    log "kafka $KAFKA_VERSION already installed in $KAFKA_HOME"
    return 0
  fi
  resolve_into "$KAFKA_POM" "$KAFKA_LIB" "kafka_2.13-$KAFKA_VERSION.jar" "kafka_2.13:$KAFKA_VERSION and its runtime deps"
  pom_digest >"$KAFKA_STAMP"
  log "kafka $KAFKA_VERSION installed: $(find "$KAFKA_LIB" -name '*.jar' | wc -l) jars in $KAFKA_LIB"
}

# Only writes KAFKA_TOOLS (never the broker's lib/), so it runs beside a running broker.
install_tools() {
  if tools_installed; then
    log "kafka-tools $KAFKA_VERSION already installed in $KAFKA_TOOLS"
    return 0
  fi
  resolve_into "$KAFKA_TOOLS_POM" "$KAFKA_TOOLS" "kafka-tools-$KAFKA_VERSION.jar" "kafka-tools:$KAFKA_VERSION (kafka-console-consumer)"
  # Whatever the console consumer needs beyond kafka-tools must be among the broker's jars
  # (tools-pom.xml): it prints its version only once its classes load.
  local java version
  java="$(java_bin)"
  if ! version="$("$java" -Xmx128m -Dlog4j.configuration=file:/dev/null -cp "$KAFKA_LIB/*:$KAFKA_TOOLS/*" \
    org.apache.kafka.tools.consumer.ConsoleConsumer --version 2>&1)" || [[ "$version" != *"$KAFKA_VERSION"* ]]; then
    rm -rf "$KAFKA_TOOLS"
    die "kafka-console-consumer does not run on the broker's jars and kafka-tools $KAFKA_VERSION: $version"
  fi
  pom_digest "$KAFKA_TOOLS_POM" >"$KAFKA_TOOLS_STAMP"
  log "kafka-tools $KAFKA_VERSION installed in $KAFKA_TOOLS (kafka-console-consumer: lib/* then tools/*)"
}

cmd_install() {
  install_broker
  install_tools
}

running_pid() { live_pid "$KAFKA_PIDFILE" "$KAFKA_MARKER"; }

print_address() { printf '127.0.0.1:%s\n' "$(<"$KAFKA_PORTFILE")"; }

write_config() {
  cat >"$KAFKA_RUN/server.properties" <<EOF
# Written by infra/engines/kafka.sh on every start; edits are lost.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$KAFKA_DATA

# One node: every internal topic has a single replica.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
default.replication.factor=1
min.insync.replicas=1

# Tests join groups constantly; the 3 s default delay only slows them down.
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
num.partitions=4
num.network.threads=2
num.io.threads=4
EOF
  cat >"$KAFKA_RUN/log4j.properties" <<'EOF'
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.org.apache.kafka.storage.internals.log=WARN
EOF
}

random_cluster_id() {
  # A Kafka Uuid: 16 random bytes, base64url without padding (22 chars). Drawn again while it
  # starts with "-", as Kafka's own Uuid.randomUuid does: the storage tool would read such an
  # id as an option (one start in 64 failed so).
  local id
  while :; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    [[ "$id" != -* ]] && break
  done
  printf '%s' "$id"
}

cmd_start() {
  check_port_number RELAY_KAFKA_PORT "$KAFKA_PORT"
  check_port_number RELAY_KAFKA_CONTROLLER_PORT "$KAFKA_CONTROLLER_PORT"
  if running_pid >/dev/null; then
    if [[ "$(<"$KAFKA_PORTFILE")" != "$KAFKA_PORT" ]]; then
      log "warning: kafka already runs on port $(<"$KAFKA_PORTFILE"), not $KAFKA_PORT"
    fi
    log "kafka already running (pid $(running_pid))"
    print_address
    return 0
  fi
  install_broker
  # The broker does not need the tools: one that cannot be fetched (offline, with a cache from an
  # older checkout) leaves only the console-consumer tests skipped. `install` fails on it.
  ( install_tools ) || log "warning: kafka-tools $KAFKA_VERSION is not installed; the tests that read the events topic with kafka-console-consumer will be skipped"
  local java
  java="$(java_bin)"
  local p
  for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
    port_open "$p" && die "port $p is already in use on 127.0.0.1 (set RELAY_KAFKA_PORT / RELAY_KAFKA_CONTROLLER_PORT)"
  done

  rm -rf "$KAFKA_RUN"
  mkdir -p "$KAFKA_RUN" "$KAFKA_DATA"
  write_config
  printf '%s\n' "$KAFKA_PORT" >"$KAFKA_PORTFILE"

  local -a jvm
  mapfile -t jvm < <(jvm_args)

  # An interrupted start must not leave a half-started broker behind.
  trap 'stop_pid "$KAFKA_PIDFILE" "$KAFKA_MARKER" 10; exit 130' INT TERM HUP

  local cluster_id
  cluster_id="$(random_cluster_id)"
  if ! "$java" "${jvm[@]}" kafka.tools.StorageTool format -t "$cluster_id" \
    -c "$KAFKA_RUN/server.properties" >"$KAFKA_RUN/format.log" 2>&1; then
    show_log_tail "$KAFKA_RUN/format.log"
    die "kafka storage format failed"
  fi

  launch "$java" "${jvm[@]}"
  trap - INT TERM HUP
  print_address
}

# Starts the broker on the prepared run directory and waits until it serves.
launch() {
  local java="$1"
  shift
  local -a jvm=("$@")
  log "starting kafka $KAFKA_VERSION on 127.0.0.1:$(<"$KAFKA_PORTFILE")"
  spawn "$KAFKA_PIDFILE" "$KAFKA_LOG" "$java" "${jvm[@]}" kafka.Kafka "$KAFKA_MARKER"

  local deadline=$((SECONDS + KAFKA_START_TIMEOUT)) pid
  pid="$(<"$KAFKA_PIDFILE")"
  while :; do
    if ! pid_alive "$pid"; then
      show_log_tail "$KAFKA_LOG"
      rm -f "$KAFKA_PIDFILE"
      die "kafka exited during startup"
    fi
    # The port opens before the broker is unfenced; the log line comes after.
    if port_open "$(<"$KAFKA_PORTFILE")" && grep -q 'Kafka Server started' "$KAFKA_LOG"; then
      break
    fi
    if ((SECONDS >= deadline)); then
      show_log_tail "$KAFKA_LOG"
      stop_pid "$KAFKA_PIDFILE" "$KAFKA_MARKER" 10
      die "kafka was not ready within ${KAFKA_START_TIMEOUT}s"
    fi
    sleep 0.3
  done
  log "kafka ready (pid $pid, log $KAFKA_LOG)"
}

jvm_args() {
  printf '%s\n' -Xms128m "-Xmx$KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
    "-Dlog4j.configuration=file:$KAFKA_RUN/log4j.properties" \
    "-Dkafka.logs.dir=$KAFKA_RUN" -cp "$KAFKA_LIB/*"
}

cmd_halt() {
  running_pid >/dev/null || die "kafka is not running (nothing to halt)"
  log "halting kafka (pid $(running_pid)); its data stays in $KAFKA_DATA"
  stop_pid "$KAFKA_PIDFILE" "$KAFKA_MARKER" 30
}

cmd_resume() {
  if running_pid >/dev/null; then
    log "kafka already running (pid $(running_pid))"
    print_address
    return 0
  fi
  [[ -f "$KAFKA_MARKER" && -d "$KAFKA_DATA" && -s "$KAFKA_PORTFILE" ]] || die "no halted kafka in $KAFKA_RUN (start one first)"
  port_open "$(<"$KAFKA_PORTFILE")" && die "port $(<"$KAFKA_PORTFILE") is already in use on 127.0.0.1"
  local java
  java="$(java_bin)"
  local -a jvm
  mapfile -t jvm < <(jvm_args)
  trap 'stop_pid "$KAFKA_PIDFILE" "$KAFKA_MARKER" 10; exit 130' INT TERM HUP
  launch "$java" "${jvm[@]}"
  trap - INT TERM HUP
  print_address
}

cmd_stop() {
  if running_pid >/dev/null; then
    log "stopping kafka (pid $(running_pid))"
  fi
  stop_pid "$KAFKA_PIDFILE" "$KAFKA_MARKER" 30
  rm -rf "$KAFKA_DATA"
}

cmd_status() {
  local pid
  if pid="$(running_pid)"; then
    log "kafka running (pid $pid)"
    print_address
  else
    log "kafka not running"
    return 3
  fi
}

case "${1:-}" in
  install | start | stop | restart | halt | resume) take_lock kafka ;;
esac

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  restart) cmd_stop; cmd_start ;;
  halt) cmd_halt ;;
  resume) cmd_resume ;;
  status) cmd_status ;;
  logs) printf '%s\n' "$KAFKA_LOG" ;;
  *)
    echo "usage: $0 install|start|stop|restart|halt|resume|status|logs" >&2
    exit 2
    ;;
esac
