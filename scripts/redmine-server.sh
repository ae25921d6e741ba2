#!/usr/bin/env bash
# Debian's Redmine on 127.0.0.1 for the integration tests and benchmarks.
#
#   bash scripts/redmine-server.sh install   # apt-get install redmine redmine-sqlite thin (idempotent)
#   bash scripts/redmine-server.sh start     # start on 127.0.0.1:$REDMINE_PORT, wait until ready, enable REST
#   bash scripts/redmine-server.sh stop      # stop the server started by `start`
#
# Environment: REDMINE_PORT (default 3000), REDMINE_STATE_DIR (pid and log files; default .servers/redmine).
# Debian keeps the configuration in /etc/redmine/default/ and the SQLite database in
# /var/lib/dbconfig-common/sqlite3/redmine/instances/default/redmine_default; it persists between runs,
# so tests create their own uniquely named projects instead of relying on earlier state.
# Nothing secret is printed: `start` prints only the base URL.
set -euo pipefail

REDMINE_HOME=/usr/share/redmine
PACKAGES=(redmine redmine-sqlite thin)
PORT="${REDMINE_PORT:-3000}"
STATE_DIR="${REDMINE_STATE_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.servers/redmine}"
# `exec` below makes the launcher pid the server pid; rails keeps its own pid file beside it.
PID_FILE="$STATE_DIR/server.pid"
RAILS_PID_FILE="$STATE_DIR/rails.pid"
LOG_FILE="$STATE_DIR/server.log"
READY_TIMEOUT_S="${REDMINE_READY_TIMEOUT:-180}"

APT_INSTALL="$(dirname "$0")/apt-install.sh"

installed() {
  bash "$APT_INSTALL" --check "${PACKAGES[@]}"
}

install() {
  bash "$APT_INSTALL" "${PACKAGES[@]}"
}

# SQLite answers "database is locked" at once unless a busy timeout is set; the server, `rails runner`
# seeding and a second test session write to the same database file, so let writers wait instead.
configure() {
  local config=/etc/redmine/default/database.yml
  if [[ -f "$config" ]] && grep -q "adapter: sqlite3" "$config" && ! grep -q "^  timeout:" "$config"; then
    sed -i 's/^  adapter: sqlite3$/&\n  timeout: 15000/' "$config"
  fi
}

running() {
  [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null
}

start() {
  installed || { echo "redmine: not installed; run: bash $0 install" >&2; exit 1; }
  configure
  mkdir -p "$STATE_DIR"
  if ! running; then
    rm -f "$PID_FILE" "$RAILS_PID_FILE"
    (cd "$REDMINE_HOME" && exec bin/rails server -e production -b 127.0.0.1 -p "$PORT" -P "$RAILS_PID_FILE") \
      >"$LOG_FILE" 2>&1 &
    echo $! >"$PID_FILE"
  fi
  # The REST API is off in a fresh Redmine; the running server sees the setting on its next request.
  (cd "$REDMINE_HOME" && RAILS_ENV=production bin/rails runner 'Setting.rest_api_enabled = "1"' >/dev/null)
  local deadline=$((SECONDS + READY_TIMEOUT_S))
  until curl -fsS -o /dev/null "http://127.0.0.1:$PORT/issue_statuses.json" 2>/dev/null \
        || curl -fsS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/login" 2>/dev/null | grep -q 200; do
    if ! running || (( SECONDS > deadline )); then
      echo "redmine: not ready (exited, or still starting after ${READY_TIMEOUT_S}s); see $LOG_FILE" >&2
      exit 1
    fi
    sleep 1
  done
  echo "http://127.0.0.1:$PORT"
}

stop() {
  if running; then
    local pid
    pid="$(cat "$PID_FILE")"
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    echo "redmine: stopped"
  fi
  rm -f "$PID_FILE" "$RAILS_PID_FILE"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
