#!/usr/bin/env bash
# The paperflows server stack on the local PostgreSQL:
#   Prefect server (database $PAPERFLOWS_PREFECT_DB), MLflow tracking server (database
#   $PAPERFLOWS_MLFLOW_DB, artifacts proxied from a server-side folder), the prefect.yaml deployments
#   and a process worker polling the work pool $PAPERFLOWS_WORK_POOL.
#
#   scripts/stack.sh up       start whatever is not running (PostgreSQL too, when we are root)
#   scripts/stack.sh down     stop worker, MLflow, Prefect: SIGINT to each process group (the worker
#                             gets a second one once its flow runs are done), wait, then SIGTERM,
#                             then SIGKILL; checks that no process is left
#   scripts/stack.sh status   what runs, with its pid and health
#   scripts/stack.sh env      the exports a shell needs:  eval "$(scripts/stack.sh env)"
#   scripts/stack.sh db       only the PostgreSQL part of `up`: the role and its two databases
#
# Prefect and MLflow connect to PostgreSQL as the role $PAPERFLOWS_PG_USER (default paperflows: LOGIN,
# not a superuser, owner of the two databases) with the password $PAPERFLOWS_PG_PASSWORD, which `up`
# and `db` require (exit 2 without it, before anything starts). The role and databases are created
# (or the role's password updated) over an admin connection as $PAPERFLOWS_PG_ADMIN_USER (default
# postgres: the local superuser, through the server's local trust/peer rule or libpq's PGPASSWORD/.pgpass).
# Every port, URL, name and folder comes from an environment variable with a default (see below).
# Logs and pid files live in $PAPERFLOWS_STACK_DIR (default <project>/.paperflows/stack).
set -euo pipefail

ROOT=${PAPERFLOWS_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
STACK_DIR=${PAPERFLOWS_STACK_DIR:-$ROOT/.paperflows/stack}
PY=${PAPERFLOWS_PYTHON:-}
if [[ -z $PY ]]; then
  if [[ -x $ROOT/.venv/bin/python ]]; then PY=$ROOT/.venv/bin/python; else PY=$(command -v python3); fi
fi
PG_HOST=${PAPERFLOWS_PG_HOST:-127.0.0.1}
PG_PORT=${PAPERFLOWS_PG_PORT:-5432}
PG_ADMIN_USER=${PAPERFLOWS_PG_ADMIN_USER:-postgres}
PG_USER=${PAPERFLOWS_PG_USER:-paperflows}
PG_PASSWORD=${PAPERFLOWS_PG_PASSWORD:-}
unset PAPERFLOWS_PG_PASSWORD                    # no process this script starts inherits it
PREFECT_DB=${PAPERFLOWS_PREFECT_DB:-paperflows_prefect}
MLFLOW_DB=${PAPERFLOWS_MLFLOW_DB:-paperflows_mlflow}
PREFECT_HOST=${PAPERFLOWS_PREFECT_HOST:-127.0.0.1}
PREFECT_PORT=${PAPERFLOWS_PREFECT_PORT:-4200}
MLFLOW_HOST=${PAPERFLOWS_MLFLOW_HOST:-127.0.0.1}
MLFLOW_PORT=${PAPERFLOWS_MLFLOW_PORT:-5000}
MLFLOW_WORKERS=${PAPERFLOWS_MLFLOW_WORKERS:-1}
ARTIFACTS=${PAPERFLOWS_MLFLOW_ARTIFACTS_DESTINATION:-$STACK_DIR/mlflow-artifacts}
WORK_POOL=${PAPERFLOWS_WORK_POOL:-paperflows-process}
DEPLOY=${PAPERFLOWS_STACK_DEPLOY:-1}            # 0: leave the deployments alone on `up`
START_TIMEOUT=${PAPERFLOWS_STACK_START_TIMEOUT:-240}
STOP_TIMEOUT=${PAPERFLOWS_STACK_STOP_TIMEOUT:-30}

PREFECT_API=http://$PREFECT_HOST:$PREFECT_PORT/api
MLFLOW_URL=http://$MLFLOW_HOST:$MLFLOW_PORT
PIDS=$STACK_DIR/pids
LOGS=$STACK_DIR/logs
COMPONENTS=(prefect mlflow worker)   # start order; stopped in reverse

say() { echo "stack: $*" >&2; }
die() { echo "stack: error: $*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------------
# processes: each component is the leader of its own process group; its pid file holds that id
# ---------------------------------------------------------------------------------------------------
pid_of() { [[ -f $PIDS/$1.pid ]] && cat "$PIDS/$1.pid" || true; }

group_alive() {  # any non-zombie process left in group $1
  [[ -n ${1:-} ]] && ps -eo pgid=,stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/ {found=1} END {exit !found}'
}

pid_alive() { [[ -n ${1:-} ]] && ps -o stat= -p "$1" 2>/dev/null | grep -qv '^Z'; }

descendants() {  # all descendants of pid $1 (flow-run processes may sit in process groups of their own)
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    echo "$child"
    descendants "$child"
  done
}

running() { group_alive "$(pid_of "$1")"; }

wait_gone() {  # wait_gone SECONDS PGID PID... : true once the group and every listed pid are gone
  local deadline=$((SECONDS + $1)) pgid=$2 p left
  shift 2
  while ((SECONDS < deadline)); do
    left=0
    [[ -n $pgid ]] && group_alive "$pgid" && left=1
    for p in "$@"; do pid_alive "$p" && left=1; done
    ((left == 0)) && return 0
    sleep 0.5
  done
  return 1
}

launch() {  # launch NAME CMD...: start in a new session (own process group), output to its log
  local name=$1
  shift
  mkdir -p "$PIDS" "$LOGS"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  echo $! >"$PIDS/$name.pid"
}

stop_component() {
  local name=$1 pgid kids
  pgid=$(pid_of "$name")
  if [[ -z $pgid ]] || ! group_alive "$pgid"; then
    rm -f "$PIDS/$name.pid"
    return 0
  fi
  kids=$(descendants "$pgid" | tr '\n' ' ')
  # SIGINT first: MLflow's server can orphan its job consumers on SIGTERM, and both servers stop
  # their whole tree on SIGINT
  say "stopping $name (process group $pgid)"
  kill -INT -- "-$pgid" 2>/dev/null || true
  if [[ $name == worker ]]; then
    # on its first interrupt a Prefect worker stops taking runs but does not exit, even when idle;
    # let in-flight flow runs finish, then interrupt again (the worker's second interrupt is a SIGKILL)
    # shellcheck disable=SC2086
    [[ -z $kids ]] || wait_gone "$STOP_TIMEOUT" "" $kids || say "flow runs still going after ${STOP_TIMEOUT}s"
    kill -INT -- "-$pgid" 2>/dev/null || true
  fi
  # shellcheck disable=SC2086
  if ! wait_gone "$STOP_TIMEOUT" "$pgid" $kids; then
    say "$name still running after ${STOP_TIMEOUT}s of SIGINT; sending SIGTERM"
    kill -TERM -- "-$pgid" 2>/dev/null || true
    # shellcheck disable=SC2086
    [[ -n $kids ]] && kill -TERM $kids 2>/dev/null || true
    # shellcheck disable=SC2086
    if ! wait_gone 10 "$pgid" $kids; then
      say "$name still running; sending SIGKILL"
      kill -KILL -- "-$pgid" 2>/dev/null || true
      # shellcheck disable=SC2086
      [[ -n $kids ]] && kill -KILL $kids 2>/dev/null || true
      # shellcheck disable=SC2086
      wait_gone 10 "$pgid" $kids || die "$name (process group $pgid) survived SIGKILL"
    fi
  fi
  rm -f "$PIDS/$name.pid"
}

# ---------------------------------------------------------------------------------------------------
# health
# ---------------------------------------------------------------------------------------------------
http_get() {  # body of GET $1, or nothing
  "$PY" - "$1" <<'EOF' 2>/dev/null || true
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        print(r.read().decode().strip())
except Exception:
    pass
EOF
}

port_in_use() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

wait_healthy() {  # wait_healthy NAME URL EXPECTED
  local name=$1 url=$2 expected=$3 deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    [[ $(http_get "$url") == "$expected" ]] && return 0
    running "$name" || { tail -n 40 "$LOGS/$name.log" >&2; die "$name exited during start-up (log: $LOGS/$name.log)"; }
    sleep 1
  done
  tail -n 40 "$LOGS/$name.log" >&2
  die "$name did not answer $url within ${START_TIMEOUT}s (log: $LOGS/$name.log)"
}

# ---------------------------------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------------------------------
pg_ready() { pg_isready -q -h "$PG_HOST" -p "$PG_PORT" -U "$PG_ADMIN_USER" 2>/dev/null; }

psql_admin() { psql -X -q -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$PG_PORT" -U "$PG_ADMIN_USER" -d postgres "$@"; }

require_password() {  # the check `up` and `db` make before anything else
  if [[ -z $PG_PASSWORD ]]; then
    echo "stack: error: set PAPERFLOWS_PG_PASSWORD, the password Prefect and MLflow use as PostgreSQL role $PG_USER" >&2
    exit 2
  fi
}

db_url() {  # db_url DRIVER DATABASE: SQLAlchemy URL of DATABASE as the role, its password URL-encoded
  local password
  password=$(printf '%s' "$PG_PASSWORD" | "$PY" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.stdin.read(), safe=""))')
  echo "postgresql+$1://$PG_USER:$password@$PG_HOST:$PG_PORT/$2"
}

ensure_role() {  # the role exists, may log in, is no superuser, and has the password of the environment
  local super verb quoted=${PG_PASSWORD//\'/\'\'}   # '' is a quote inside an SQL string literal
  super=$(psql_admin -tAc "SELECT rolsuper FROM pg_roles WHERE rolname = '$PG_USER'")
  [[ $super != t ]] || die "PostgreSQL role $PG_USER is a superuser; set PAPERFLOWS_PG_USER to a role of its own"
  if [[ -z $super ]]; then verb=CREATE; say "creating role $PG_USER"; else verb=ALTER; say "updating role $PG_USER"; fi
  # the password travels on stdin, never on a command line
  psql_admin <<SQL
$verb ROLE $PG_USER LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD '$quoted';
SQL
}

ensure_postgres() {
  command -v psql >/dev/null || die "psql not found: install the PostgreSQL client"
  if ! pg_ready; then
    local version
    version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
    if [[ $(id -u) == 0 && -n $version ]] && command -v pg_ctlcluster >/dev/null; then
      say "starting PostgreSQL $version (cluster main)"
      pg_ctlcluster --skip-systemctl-redirect "$version" main start
      for _ in $(seq 1 30); do pg_ready && break; sleep 1; done
    fi
    pg_ready || die "PostgreSQL does not answer on $PG_HOST:$PG_PORT (user $PG_ADMIN_USER); start it first"
  fi
  local name owner
  for name in "$PG_USER" "$PREFECT_DB" "$MLFLOW_DB"; do
    [[ $name =~ ^[a-z_][a-z0-9_]*$ ]] || die "'$name' must be a plain lower-case identifier (role and database names)"
  done
  ensure_role
  for name in "$PREFECT_DB" "$MLFLOW_DB"; do
    owner=$(psql_admin -tAc "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '$name'")
    if [[ -z $owner ]]; then
      say "creating database $name (owner $PG_USER)"
      psql_admin -c "CREATE DATABASE $name OWNER $PG_USER"
    elif [[ $owner != "$PG_USER" ]]; then
      die "database $name belongs to $owner, not $PG_USER: drop it, or set PAPERFLOWS_PREFECT_DB / PAPERFLOWS_MLFLOW_DB"
    fi
  done
}

# ---------------------------------------------------------------------------------------------------
# components
# ---------------------------------------------------------------------------------------------------
start_prefect() {
  running prefect && { say "prefect server already running (pid $(pid_of prefect))"; return; }
  port_in_use "$PREFECT_HOST" "$PREFECT_PORT" && die "port $PREFECT_HOST:$PREFECT_PORT is taken (set PAPERFLOWS_PREFECT_PORT)"
  mkdir -p "$STACK_DIR/prefect-home"
  say "starting prefect server on $PREFECT_API (database $PREFECT_DB)"
  # all services stay on: they record task runs and events and run schedules
  PREFECT_HOME=$STACK_DIR/prefect-home \
  PREFECT_SERVER_DATABASE_CONNECTION_URL=$(db_url asyncpg "$PREFECT_DB") \
  PREFECT_SERVER_ANALYTICS_ENABLED=false \
  PREFECT_UI_API_URL=$PREFECT_API \
    launch prefect "$PY" -m prefect server start --host "$PREFECT_HOST" --port "$PREFECT_PORT"
  wait_healthy prefect "$PREFECT_API/health" true
}

start_mlflow() {
  running mlflow && { say "mlflow server already running (pid $(pid_of mlflow))"; return; }
  port_in_use "$MLFLOW_HOST" "$MLFLOW_PORT" && die "port $MLFLOW_HOST:$MLFLOW_PORT is taken (set PAPERFLOWS_MLFLOW_PORT)"
  mkdir -p "$ARTIFACTS"
  say "starting mlflow server on $MLFLOW_URL (database $MLFLOW_DB, artifacts $ARTIFACTS)"
  # the store URI (with the password) goes by environment, not on the command line `ps` shows
  MLFLOW_BACKEND_STORE_URI=$(db_url psycopg2 "$MLFLOW_DB") MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false \
    launch mlflow "$PY" -m mlflow server \
      --artifacts-destination "$ARTIFACTS" --serve-artifacts \
      --host "$MLFLOW_HOST" --port "$MLFLOW_PORT" --workers "$MLFLOW_WORKERS"
  wait_healthy mlflow "$MLFLOW_URL/health" OK
}

deploy_flows() {
  [[ $DEPLOY == 1 ]] || return 0
  say "creating the prefect.yaml deployments for work pool $WORK_POOL"
  (cd "$ROOT" && PREFECT_API_URL=$PREFECT_API PAPERFLOWS_WORK_POOL=$WORK_POOL PAPERFLOWS_ROOT=$ROOT \
    PREFECT_HOME=$STACK_DIR/prefect-home PREFECT_SERVER_ANALYTICS_ENABLED=false \
    "$PY" -m paperflows deploy --pool "$WORK_POOL" >>"$LOGS/deploy.log" 2>&1) \
    || { tail -n 40 "$LOGS/deploy.log" >&2; die "paperflows deploy failed (log: $LOGS/deploy.log)"; }
}

start_worker() {
  running worker && { say "worker already running (pid $(pid_of worker))"; return; }
  say "starting a process worker on pool $WORK_POOL"
  # flow runs inherit this environment: they log to the MLflow server and find the project by cwd
  (cd "$ROOT" && PREFECT_API_URL=$PREFECT_API MLFLOW_TRACKING_URI=$MLFLOW_URL \
    PREFECT_HOME=$STACK_DIR/prefect-home PREFECT_SERVER_ANALYTICS_ENABLED=false \
    PAPERFLOWS_WORK_POOL=$WORK_POOL PAPERFLOWS_PROGRESS=${PAPERFLOWS_PROGRESS:-0} \
    launch worker "$PY" -m prefect worker start --pool "$WORK_POOL" --type process)
  local deadline=$((SECONDS + START_TIMEOUT))
  until grep -q "started!" "$LOGS/worker.log" 2>/dev/null; do
    running worker || { tail -n 40 "$LOGS/worker.log" >&2; die "worker exited during start-up"; }
    ((SECONDS < deadline)) || die "worker did not start within ${START_TIMEOUT}s (log: $LOGS/worker.log)"
    sleep 1
  done
}

cmd_up() {
  require_password
  mkdir -p "$PIDS" "$LOGS"
  ensure_postgres
  start_prefect
  start_mlflow
  deploy_flows
  start_worker
  say "up: Prefect $PREFECT_API (UI ${PREFECT_API%/api}), MLflow $MLFLOW_URL, worker on pool $WORK_POOL"
  say 'for this shell: eval "$(scripts/stack.sh env)"'
}

cmd_down() {
  local i
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do stop_component "${COMPONENTS[i]}"; done
  say "down"
}

cmd_status() {
  local name pid health bad=0
  for name in "${COMPONENTS[@]}"; do
    pid=$(pid_of "$name")
    case $name in
      prefect) health=$(http_get "$PREFECT_API/health") ;;
      mlflow) health=$(http_get "$MLFLOW_URL/health") ;;
      worker) health=- ;;
    esac
    if running "$name"; then
      printf '%-8s running  pid %-8s health %s\n' "$name" "$pid" "${health:-no answer}"
    else
      printf '%-8s stopped\n' "$name"
      bad=1
    fi
  done
  return $bad
}

cmd_env() {
  printf 'export PREFECT_API_URL=%q\n' "$PREFECT_API"
  printf 'export MLFLOW_TRACKING_URI=%q\n' "$MLFLOW_URL"
  printf 'export PAPERFLOWS_WORK_POOL=%q\n' "$WORK_POOL"
}

case ${1:-} in
  up) cmd_up ;;
  db) require_password; ensure_postgres ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *) echo "usage: scripts/stack.sh up|down|status|env|db" >&2; exit 2 ;;
esac
