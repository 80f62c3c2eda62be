# shellcheck shell=bash disable=SC2034
# Shared helpers for the engine scripts. Sourced, not executed.
# Everything a human should read goes to stderr: stdout of `engines.sh up`
# is eval'ed by callers and must hold only export lines.

ENGINES_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Survives between runs so the Maven download and the Go build happen once.
ENGINES_CACHE="${RELAY_ENGINES_CACHE:-$HOME/.cache/relay-engines}"
# Pid files, configs, logs and data of running engines.
ENGINES_RUN="${RELAY_ENGINES_RUN:-$ENGINES_CACHE/run}"

log() { printf '[engines] %s\n' "$*" >&2; }
die() { printf '[engines] error: %s\n' "$*" >&2; exit 1; }

need_cmd() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' not found on PATH ($2)"
}

# True when something accepts TCP connections on 127.0.0.1:$1.
port_open() {
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" >/dev/null 2>&1
}

# kill -0 alone is not enough: an engine that crashes while this script still
# runs stays a zombie child of it until reaped, and zombies "exist".
pid_alive() {
  local state
  kill -0 "$1" 2>/dev/null || return 1
  state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
  [[ -n "$state" && "$state" != Z && "$state" != X ]]
}

# Prints the pid from $1 when that process is alive and its command line
# contains $2 (guards against a recycled pid after a reboot or crash).
live_pid() {
  local pidfile="$1" marker="$2" pid
  [[ -s "$pidfile" ]] || return 1
  pid="$(<"$pidfile")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  pid_alive "$pid" || return 1
  local cmdline
  cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == *"$marker"* ]] || return 1
  printf '%s\n' "$pid"
}

# Runs "$@" detached in its own session, output to $logfile, and writes the
# pid of the exec'ed program to $pidfile. The own session keeps it out of the
# caller's Ctrl-C and lets us kill its whole process group; the redirections
# keep `eval "$(engines.sh up)"` from waiting on an inherited stdout.
spawn() {
  local pidfile="$1" logfile="$2"
  shift 2
  rm -f "$pidfile"
  # 9>&- : the engine must not inherit (and so hold forever) the lock fd.
  # shellcheck disable=SC2016 # $$, $0 and $@ belong to the inner shell
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" \
    </dev/null >"$logfile" 2>&1 9>&- &
  local i
  for ((i = 0; i < 50; i++)); do
    [[ -s "$pidfile" ]] && return 0
    sleep 0.1
  done
  die "process did not start (no pid file $pidfile); see $logfile"
}

# Serialises install/start/stop of one engine, so that parallel callers
# (two test runners, a developer and CI) neither build twice nor race on the
# pid file. Held on fd 9 until the script exits.
take_lock() {
  need_cmd flock "part of util-linux"
  mkdir -p "$ENGINES_RUN"
  exec 9>"$ENGINES_RUN/$1.lock"
  if ! flock -n 9; then
    log "waiting for another $1 command to finish (lock $ENGINES_RUN/$1.lock)"
    flock -w "${2:-900}" 9 || die "timed out waiting for lock $ENGINES_RUN/$1.lock"
  fi
}

# TERM, then KILL after $3 seconds, the process group led by the pid in $1.
stop_pid() {
  local pidfile="$1" marker="$2" grace="${3:-20}" pid i
  if pid="$(live_pid "$pidfile" "$marker")"; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
      pid_alive "$pid" || break
      sleep 0.1
    done
    if pid_alive "$pid"; then
      log "pid $pid did not stop in ${grace}s; killing"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        pid_alive "$pid" || break
        sleep 0.1
      done
    fi
  fi
  rm -f "$pidfile"
}

show_log_tail() {
  local logfile="$1"
  log "log: $logfile"
  if [[ -f "$logfile" ]]; then
    tail -n "${2:-40}" "$logfile" | sed 's/^/    /' >&2
  fi
}

check_port_number() {
  if ! [[ "$2" =~ ^[0-9]+$ ]] || (($2 < 1 || $2 > 65535)); then
    die "$1 must be a TCP port number, got '$2'"
  fi
}
