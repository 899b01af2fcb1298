#!/usr/bin/env bash
# A production-shaped Temporal on this machine, without Docker: the Temporal server
# (bin/temporal-server, built from go.temporal.io/server) with PostgreSQL persistence and
# visibility, its schema set up by Temporal's own bin/temporal-sql-tool, several history shards,
# and frontend, history, matching and worker as separate processes on loopback ports, configured by
# deploy/temporal/cluster.yaml and deploy/temporal-dynamicconfig.yaml (the files docker-compose.yml
# mounts); the Web UI (bin/temporal-ui-server) pointed at it.
#   scripts/temporal-cluster.sh start DIR PGURL   set up the schema (once), start everything, wait until a
#                                                 namespace answers, register toolgate's search attributes
#   scripts/temporal-cluster.sh stop DIR          stop every process it started
#   scripts/temporal-cluster.sh kill DIR SERVICE  SIGKILL one service (history, matching, frontend, worker)
#   scripts/temporal-cluster.sh revive DIR SERVICE start a killed service again and wait until the cluster answers
# PGURL is a PostgreSQL URL whose user may create databases (temporal, temporal_visibility).
# Logs and pid files go to DIR. The frontend's address and the namespace to create are what Temporal's
# client configuration gives (bin/starter temporal-config: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, a
# profile; 127.0.0.1:7233 and default). Environment: TOOLGATE_CLUSTER_TLS_DIR=DIR for mTLS (the
# frontend demands client certificates: starter dev-certs makes them there, with DIR/temporal.toml, a
# client profile named toolgate), CODEC_URL for the Web UI (http://127.0.0.1:8089),
# TOOLGATE_TEMPORAL_UI=0 for none, NUM_HISTORY_SHARDS (8, fixed when the cluster is created).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cmd="${1:?usage: scripts/temporal-cluster.sh start|stop|kill|revive DIR ...}"
dir="${2:?usage: scripts/temporal-cluster.sh $cmd DIR}"
mkdir -p "$dir"; dir="$(cd "$dir" && pwd)"
bin="$root/bin"
address="$("$bin/starter" temporal-config --prop address)"
namespace="$("$bin/starter" temporal-config --prop namespace)"
services=(history matching frontend worker)
tls_flags=()
if [ -n "${TOOLGATE_CLUSTER_TLS_DIR:-}" ]; then
  mkdir -p "$TOOLGATE_CLUSTER_TLS_DIR"
  TOOLGATE_CLUSTER_TLS_DIR="$(cd "$TOOLGATE_CLUSTER_TLS_DIR" && pwd)"; export TOOLGATE_CLUSTER_TLS_DIR
  tls="$TOOLGATE_CLUSTER_TLS_DIR"
  "$bin/starter" dev-certs --dir "$tls" --toml "$tls/temporal.toml" --profile toolgate --address "$address" --namespace "$namespace" >/dev/null
  tls_flags=(--tls-cert-path "$tls/client.pem" --tls-key-path "$tls/client.key" --tls-ca-path "$tls/ca.pem" --tls-server-name localhost)
fi

answers() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

# The PostgreSQL URL's parts, for the server's config template and the SQL tool.
db_env() {
  local url="${1#postgres://}"; url="${url#postgresql://}"
  local auth="${url%%@*}" hostport="${url#*@}"; hostport="${hostport%%/*}"
  export POSTGRES_USER="${auth%%:*}" POSTGRES_PWD=""
  [[ "$auth" == *:* ]] && POSTGRES_PWD="${auth#*:}"
  export POSTGRES_SEEDS="${hostport%:*}" DB_PORT="${hostport##*:}"
  [ "$DB_PORT" = "$hostport" ] && DB_PORT=5432
  echo "POSTGRES_USER=$POSTGRES_USER POSTGRES_PWD=$POSTGRES_PWD POSTGRES_SEEDS=$POSTGRES_SEEDS DB_PORT=$DB_PORT" >"$dir/db.env"
}

schema() {
  local sql=("$bin/temporal-sql-tool" --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER")
  [ -n "$POSTGRES_PWD" ] && sql+=(--pw "$POSTGRES_PWD")
  local db name
  for db in temporal temporal_visibility; do
    name=temporal; [ "$db" = temporal_visibility ] && name=visibility
    # create-database fails when it exists; setup-schema -v 0.0 is a no-op on a set-up database.
    "${sql[@]}" --db "$db" create-database >>"$dir/schema.log" 2>&1 || true
    "${sql[@]}" --db "$db" setup-schema -v 0.0 >>"$dir/schema.log" 2>&1
    "${sql[@]}" --db "$db" update-schema --schema-name "postgresql/v12/$name" >>"$dir/schema.log" 2>&1 ||
      { tail -20 "$dir/schema.log" >&2; exit 1; }
  done
}

start_service() {
  local svc="$1"
  # shellcheck disable=SC1091
  set -a; . "$dir/db.env"; set +a
  BIND_ON_IP=127.0.0.1 FRONTEND_ADDRESS="$address" DYNAMIC_CONFIG_FILE_PATH="$root/deploy/temporal-dynamicconfig.yaml" \
    "$bin/temporal-server" --root / --config "$root/deploy/temporal" --env cluster --allow-no-auth start --service "$svc" \
    >>"$dir/$svc.log" 2>&1 &
  echo $! >"$dir/$svc.pid"
}

# membershipPort in deploy/temporal/cluster.yaml (every service opens it once it has joined; the worker service serves no gRPC).
declare -A member_ports=([frontend]=6933 [history]=6934 [matching]=6935 [worker]=6939)
wait_port() {
  for _ in $(seq 120); do
    answers "127.0.0.1:${member_ports[$1]}" && return 0
    kill -0 "$(cat "$dir/$1.pid")" 2>/dev/null || { tail -5 "$dir/$1.log" >&2; echo "Temporal $1 exited; see $dir/$1.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "Temporal $1 did not listen; see $dir/$1.log" >&2; exit 1
}

temporal_cli() { "$bin/temporal" --address "$address" "${tls_flags[@]}" "$@"; }

wait_ready() {
  for _ in $(seq 120); do
    temporal_cli operator cluster health >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "the Temporal cluster did not become healthy; see $dir/*.log" >&2; exit 1
}

wait_namespace() {
  for _ in $(seq 120); do
    temporal_cli workflow count --namespace "$namespace" >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "namespace $namespace does not answer; see $dir/*.log" >&2; exit 1
}

ui() {
  mkdir -p "$dir/ui"
  local codec="${CODEC_URL:-http://127.0.0.1:8089}"
  cat >"$dir/ui/cluster.yaml" <<YAML
temporalGrpcAddress: $address
host: 127.0.0.1
port: ${TOOLGATE_TEMPORAL_UI_PORT:-8233}
enableUi: true
defaultNamespace: $namespace
cors:
  allowOrigins: ["http://127.0.0.1:${TOOLGATE_TEMPORAL_UI_PORT:-8233}", "http://localhost:${TOOLGATE_TEMPORAL_UI_PORT:-8233}"]
codec:
  endpoint: $codec
YAML
  if [ -n "${TOOLGATE_CLUSTER_TLS_DIR:-}" ]; then
    cat >>"$dir/ui/cluster.yaml" <<YAML
tls:
  caFile: $TOOLGATE_CLUSTER_TLS_DIR/ca.pem
  certFile: $TOOLGATE_CLUSTER_TLS_DIR/client.pem
  keyFile: $TOOLGATE_CLUSTER_TLS_DIR/client.key
  serverName: localhost
  enableHostVerification: true
YAML
  fi
  "$bin/temporal-ui-server" --root / --config "$dir/ui" --env cluster start >>"$dir/ui.log" 2>&1 &
  echo $! >"$dir/ui.pid"
}

case "$cmd" in
  start)
    pgurl="${3:?usage: scripts/temporal-cluster.sh start DIR PGURL}"
    if answers "$address"; then echo "something already answers at $address" >&2; exit 1; fi
    db_env "$pgurl"
    schema
    # One at a time, each answering before the next starts: on a new database the first one writes the
    # cluster metadata, and services started together race for it (one exits, "Failed to apply
    # cluster metadata").
    for svc in "${services[@]}"; do start_service "$svc"; wait_port "$svc"; done
    wait_ready
    if ! temporal_cli operator namespace describe --namespace "$namespace" >/dev/null 2>&1; then
      temporal_cli operator namespace create --namespace "$namespace" --retention 72h >/dev/null
    fi
    wait_namespace
    existing="$(temporal_cli operator search-attribute list --namespace "$namespace" 2>/dev/null || true)"
    for sa in $("$bin/starter" search-attributes); do
      grep -qw "${sa%=*}" <<<"$existing" ||
        temporal_cli operator search-attribute create --namespace "$namespace" --name "${sa%=*}" --type "${sa#*=}" >/dev/null
    done
    [ "${TOOLGATE_TEMPORAL_UI:-1}" = 0 ] || ui
    echo "Temporal cluster at $address, namespace $namespace${TOOLGATE_CLUSTER_TLS_DIR:+, mTLS (client profile toolgate in $TOOLGATE_CLUSTER_TLS_DIR/temporal.toml)} (history, matching, frontend, worker; logs in $dir)" ;;
  stop)
    for p in "$dir"/*.pid; do
      [ -e "$p" ] || continue
      kill "$(cat "$p")" 2>/dev/null || true
      rm -f "$p"
    done ;;
  kill)
    svc="${3:?usage: scripts/temporal-cluster.sh kill DIR SERVICE}"
    kill -9 "$(cat "$dir/$svc.pid")" ;;
  revive)
    svc="${3:?usage: scripts/temporal-cluster.sh revive DIR SERVICE}"
    start_service "$svc"
    wait_port "$svc"
    wait_ready ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
