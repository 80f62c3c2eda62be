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

# Prints the pid from $1 when that process is alive and its command line
# contains $2 (guards against a recycled pid after a reboot or crash).
live_pid() {
  local pidfile="$1" marker="$2" pid
  [[ -s "$pidfile" ]] || return 1
  pid="$(<"$pidfile")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$marker" || return 1
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
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" \
    </dev/null >"$logfile" 2>&1 &
  local i
  for ((i = 0; i < 50; i++)); do
    [[ -s "$pidfile" ]] && return 0
    sleep 0.1
  done
  die "process did not start (no pid file $pidfile); see $logfile"
}

# TERM, then KILL after $3 seconds, the process group led by the pid in $1.
stop_pid() {
  local pidfile="$1" marker="$2" grace="${3:-20}" pid i
  if pid="$(live_pid "$pidfile" "$marker")"; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "pid $pid did not stop in ${grace}s; killing"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
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
  [[ "$2" =~ ^[0-9]+$ ]] && (($2 > 0 && $2 < 65536)) || die "$1 must be a TCP port number, got '$2'"
}
