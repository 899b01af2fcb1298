#!/usr/bin/env bash
# Runs the whole toolgate stack on one machine until Ctrl-C:
# Temporal dev server with the Web UI, migrations, the Mangrove upstream and the worker,
# and, beside Mangrove, the card desk: a pack in a file (examples/packs/carddesk.yaml) whose
# upstream stand-in (examples/carddesk) takes the demo provider's exchanged tokens (RFC 8693),
# PlanCover, an insurer's member portal (packs/plancover), whose stand-in takes them too,
# Northgate Bank's card desk (packs/northgate), whose callers verify before they act,
# and the official MCP filesystem and memory servers, gated as they are (examples/packs/reference.yaml).
# Every port can be moved: TEMPORAL_ADDRESS, TOOLGATE_TEMPORAL_UI_PORT, UPSTREAM_ADDR, CARDDESK_ADDR,
# PLANCOVER_ADDR, NORTHGATE_ADDR, IDP_ADDR, APPROVALS_ADDR, MCP_ADDR, CODEC_ADDR, METRICS_ADDR.
# With TOOLGATE_CLUSTER=1 (make cluster): instead of the dev server, a production-shaped Temporal
# (scripts/temporal-cluster.sh: PostgreSQL, four service processes, the Web UI) and two workers;
# its PostgreSQL and logs live in .dev/cluster (the keys and demo users are shared with make dev).
# TOOLGATE_CLUSTER_TLS=1 as well: the cluster's frontend demands client certificates (made into
# .dev/cluster/tls), and every process reaches it through the client profile made beside them.
# Where Temporal is, and the namespace, are Temporal's client configuration's (TEMPORAL_ADDRESS,
# TEMPORAL_NAMESPACE, TEMPORAL_PROFILE...; 127.0.0.1:7233 and default), read by bin/starter.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/bin:$PATH"
# (Before the exchange's secrets are set: an exchange pack named in the environment waits for them.)
address="$(env -u TOOLGATE_EXCHANGE_PACKS bin/starter temporal-config --prop address)"
namespace="$(env -u TOOLGATE_EXCHANGE_PACKS bin/starter temporal-config --prop namespace)"
export UPSTREAM_ADDR="${UPSTREAM_ADDR:-127.0.0.1:8081}"
export UPSTREAM_URL="${UPSTREAM_URL:-http://$UPSTREAM_ADDR}"
ui_port="${TOOLGATE_TEMPORAL_UI_PORT:-8233}"
# The card UI links a call's story to its history in the Web UI (a server of your own: set yours).
export TOOLGATE_TEMPORAL_WEB_URL="${TOOLGATE_TEMPORAL_WEB_URL:-http://127.0.0.1:$ui_port}"
# The packs: Mangrove, the card desk, PlanCover, Northgate and the MCP reference servers (a pack file in
# front of two servers from npm, examples/packs/reference.yaml), unless TOOLGATE_PACKS names others.
carddesk=""
if [ -z "${TOOLGATE_PACKS:-}" ]; then
  carddesk=1
  export TOOLGATE_PACKS=mangrove,examples/packs/carddesk.yaml,plancover,northgate,examples/packs/reference.yaml
  # The MCP reference servers' folder: what the filesystem server may touch, where the memory server keeps its graph.
  export TOOLGATE_SCRATCH="${TOOLGATE_SCRATCH:-$PWD/.dev/scratch}"
  mkdir -p "$TOOLGATE_SCRATCH"
  export CARDDESK_ADDR="${CARDDESK_ADDR:-127.0.0.1:8083}" PLANCOVER_ADDR="${PLANCOVER_ADDR:-127.0.0.1:8084}" NORTHGATE_ADDR="${NORTHGATE_ADDR:-127.0.0.1:8085}"
  export TOOLGATE_UPSTREAMS="carddesk=http://$CARDDESK_ADDR,plancover=http://$PLANCOVER_ADDR,northgate=http://$NORTHGATE_ADDR${TOOLGATE_UPSTREAMS:+,$TOOLGATE_UPSTREAMS}"
  # Each pack on its own task queue; Mangrove on TOOLGATE_TASK_QUEUE.
  export TOOLGATE_TASK_QUEUES="${TOOLGATE_TASK_QUEUES:-carddesk=toolgate-carddesk,plancover=toolgate-plancover,northgate=toolgate-northgate,reference=toolgate-reference}"
fi
# A team's own packs beside those (make dev PACKS=my.yaml UPSTREAMS=mine=http://127.0.0.1:9000 PEOPLE=people.json,
# docs/packs.md): PACKS joins TOOLGATE_PACKS; each of UPSTREAMS (pack=URL, comma-separated) is that pack's
# upstream, which takes the demo provider's tokens for its own audience, its URL (RFC 8693); PEOPLE are
# people files the demo provider adds (bin/idp users add).
team_upstreams=""
if [ -n "${PACKS:-}" ]; then
  export TOOLGATE_PACKS="$TOOLGATE_PACKS,$PACKS"
fi
upstreams="${UPSTREAMS:-}"
for pair in ${upstreams//,/ }; do
  name="${pair%%=*}" url="${pair#*=}"
  if [ "$name" = "$pair" ] || [ -z "$name" ] || [[ "$url" != http://* && "$url" != https://* ]]; then
    echo "UPSTREAMS: \"$pair\": want pack=URL, e.g. mine=http://127.0.0.1:9000 (the pack's name is its file's pack:)" >&2
    exit 2
  fi
  team_upstreams="$team_upstreams,$pair"
done
team_upstreams="${team_upstreams#,}"
[ -z "$team_upstreams" ] || export TOOLGATE_UPSTREAMS="${TOOLGATE_UPSTREAMS:+$TOOLGATE_UPSTREAMS,}$team_upstreams"
# Dev mode: the demo upstream key and the card UI's demo sign-in work only with it.
export TOOLGATE_DEV=1
cluster="${TOOLGATE_CLUSTER:-}"
logs=.dev; [ -n "$cluster" ] && logs=.dev/cluster
mkdir -p "$logs"
pids=()
private_pg=""
cleanup() {
  trap - EXIT INT TERM
  if grep -qx "TOOLGATE_DEV_PID=$$" .dev/env 2>/dev/null; then rm -f .dev/env; fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true
  if [ -n "$cluster" ]; then ./scripts/temporal-cluster.sh stop "$logs/temporal"; fi
  if [ -n "$private_pg" ]; then ./scripts/pg.sh stop "$private_pg"; fi
}
trap cleanup EXIT
# Ctrl-C (or a TERM, which make passes on) is the way to stop: it stops everything and is no
# failure, whichever process the signal reached first; any other end (a closed terminal's HUP, a
# crashed child) runs the same cleanup on EXIT.
trap 'cleanup; echo "stopped"; exit 0' INT TERM

if [ -n "${DATABASE_URL:-}" ]; then
  echo "using DATABASE_URL"
else
  # A private cluster in .dev/pg (kept between runs, so the demo data stays; make reset forgets it).
  chmod 755 .dev "$logs"
  private_pg="$logs/pg"
  server="$(./scripts/pg.sh start "$private_pg")"
  export DATABASE_URL="${server%/postgres?*}/toolgate?sslmode=disable"
fi

host="${address%:*}"; port="${address##*:}"
sa_flags=(); for sa in $(bin/starter search-attributes); do sa_flags+=(--search-attribute "$sa"); done
[ "$namespace" = default ] || sa_flags+=(--namespace "$namespace")
if [ -n "$cluster" ]; then
  [ -z "${TOOLGATE_CLUSTER_TLS:-}" ] || export TOOLGATE_CLUSTER_TLS_DIR="$PWD/$logs/tls"
  CODEC_URL="http://${CODEC_ADDR:-127.0.0.1:8089}" ./scripts/temporal-cluster.sh start "$logs/temporal" "$DATABASE_URL"
  if [ -n "${TOOLGATE_CLUSTER_TLS:-}" ]; then
    # Every process (and the temporal CLI) now reaches the cluster through the profile made beside the certificates.
    export TEMPORAL_CONFIG_FILE="$TOOLGATE_CLUSTER_TLS_DIR/temporal.toml" TEMPORAL_PROFILE=toolgate
  fi
elif (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
  echo "A Temporal server already answers at $address; using it."
else
  # start-dev picks its inner services' ports itself, and another program starting at the same moment
  # may take one first: a server that stops before it answers is started again, twice at most.
  for attempt in 1 2 3; do
    temporal server start-dev --ip "$host" --port "$port" --ui-port "$ui_port" \
      --db-filename .dev/temporal.db --log-level warn \
      --dynamic-config-value history.transferProcessorMaxPollRPS=1000 \
      --dynamic-config-value system.enableActivityEagerExecution=true \
      --dynamic-config-value matching.numTaskqueueReadPartitions=1 \
      --dynamic-config-value matching.numTaskqueueWritePartitions=1 \
      --dynamic-config-value history.maximumSignalsPerExecution=1000 \
      --dynamic-config-value limit.blobSize.error=262144 \
      --ui-codec-endpoint "http://${CODEC_ADDR:-127.0.0.1:8089}" "${sa_flags[@]}" \
      >.dev/temporal.log 2>&1 &
    temporal_pid=$!
    pids+=("$temporal_pid")
    for _ in $(seq 180); do
      if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null || ! kill -0 "$temporal_pid" 2>/dev/null; then break; fi
      sleep 1
    done
    kill -0 "$temporal_pid" 2>/dev/null && break
    # Reaped and forgotten, so the wait on the stack below does not take it for a process that exited.
    wait "$temporal_pid" 2>/dev/null || true
    unset 'pids[-1]'
    echo "The Temporal dev server stopped before it answered at $address (try $attempt of 3); the end of .dev/temporal.log:" >&2
    tail -n 5 .dev/temporal.log >&2
  done
  if ! kill -0 "$temporal_pid" 2>/dev/null; then
    echo "No Temporal dev server answers at $address: .dev/temporal.log says why (a port taken: TEMPORAL_ADDRESS and TOOLGATE_TEMPORAL_UI_PORT move it)." >&2
    exit 1
  fi
  if ! (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
    echo "The Temporal dev server at $address did not answer within 3 minutes; .dev/temporal.log says what it is doing." >&2
    exit 1
  fi
  temporal operator cluster health --address "$address" >/dev/null
fi
# A kept .dev/temporal.db or a server of your own may predate an attribute: register any missing one
# (the temporal CLI reads the same client configuration: TLS, API key, profile).
existing=$(temporal operator search-attribute list --address "$address" --namespace "$namespace" 2>/dev/null || true)
for sa in $(bin/starter search-attributes); do
  name="${sa%=*}"
  grep -qw "$name" <<<"$existing" ||
    temporal operator search-attribute create --address "$address" --namespace "$namespace" --name "$name" --type "${sa#*=}" >/dev/null
done

if [ ! -s .dev/keys.env ]; then
  # Approval signing pair and payload encryption key for this laptop, readable by its owner alone.
  (umask 077; bin/starter keygen --id dev >.dev/keys.env)
fi
chmod 600 .dev/keys.env
if ! grep -q TOOLGATE_WITHDRAW_KEYS .dev/keys.env; then
  (umask 077; bin/starter keygen --id dev --withdraw >>.dev/keys.env)
fi
if ! grep -q APPROVALS_OIDC_CLIENT_SECRET .dev/keys.env; then
  # The card UI's client secret at the demo identity provider.
  echo "APPROVALS_OIDC_CLIENT_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '/+=')" >>.dev/keys.env
fi
if ! grep -q TOOLGATE_EXCHANGE_CLIENT_SECRET .dev/keys.env; then
  # toolgate's own client at the demo identity provider, for token exchange (RFC 8693).
  echo "TOOLGATE_EXCHANGE_CLIENT_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '/+=')" >>.dev/keys.env
fi
set -a; . .dev/keys.env; set +a
# The demo identity provider and the card UI's registration with it.
export IDP_ADDR="${IDP_ADDR:-127.0.0.1:8082}"
export APPROVALS_OIDC_ISSUER="${APPROVALS_OIDC_ISSUER:-http://$IDP_ADDR}" IDP_ISSUER="${IDP_ISSUER:-http://$IDP_ADDR}"
export APPROVALS_OIDC_CLIENT_ID=toolgate-approvals IDP_CLIENT_ID=toolgate-approvals IDP_CLIENT_SECRET="$APPROVALS_OIDC_CLIENT_SECRET"
export APPROVALS_OIDC_REDIRECT_URL="http://${APPROVALS_ADDR:-127.0.0.1:8080}/auth/callback" IDP_REDIRECT_URIS="http://${APPROVALS_ADDR:-127.0.0.1:8080}/auth/callback"
export IDP_BACKCHANNEL_LOGOUT_URI="http://${APPROVALS_ADDR:-127.0.0.1:8080}/auth/backchannel-logout"
export TOOLGATE_CARDS_URL="${TOOLGATE_CARDS_URL:-http://${APPROVALS_ADDR:-127.0.0.1:8080}}"
# The worker trusts sign-ins from the demo provider, and (dev only) decisions `starter approve` vouches for.
export TOOLGATE_APPROVER_ISSUERS="${TOOLGATE_APPROVER_ISSUERS:-$APPROVALS_OIDC_ISSUER,urn:toolgate:operator}"
# The MCP server and the worker exchange tokens at the demo provider as toolgate's client, which may
# ask tokens for the card desk's, PlanCover's and Northgate's audiences alone; each takes its own.
export TOOLGATE_EXCHANGE_ISSUER="${TOOLGATE_EXCHANGE_ISSUER:-$APPROVALS_OIDC_ISSUER}" IDP_EXCHANGE_CLIENT_SECRET="$TOOLGATE_EXCHANGE_CLIENT_SECRET"
exchange_packs="${TOOLGATE_EXCHANGE_PACKS:-}" audiences="${IDP_EXCHANGE_AUDIENCES:-}"
if [ -n "$carddesk" ]; then
  exchange_packs="carddesk,plancover,northgate${exchange_packs:+,$exchange_packs}"
  audiences="http://$CARDDESK_ADDR,http://$PLANCOVER_ADDR,http://$NORTHGATE_ADDR${audiences:+,$audiences}"
  export CARDDESK_ISSUER="$APPROVALS_OIDC_ISSUER" PLANCOVER_ISSUER="$APPROVALS_OIDC_ISSUER" NORTHGATE_ISSUER="$APPROVALS_OIDC_ISSUER"
fi
for pair in ${team_upstreams//,/ }; do
  exchange_packs="${exchange_packs:+$exchange_packs,}${pair%%=*}" audiences="${audiences:+$audiences,}${pair#*=}"
done
[ -z "$exchange_packs" ] || export TOOLGATE_EXCHANGE_PACKS="$exchange_packs" IDP_EXCHANGE_AUDIENCES="$audiences"
bin/starter migrate
bin/upstream >"$logs/upstream.log" 2>&1 &
pids+=($!)
if [ -n "$carddesk" ]; then
  bin/carddesk >"$logs/carddesk.log" 2>&1 &
  pids+=($!)
  bin/plancover >"$logs/plancover.log" 2>&1 &
  pids+=($!)
  bin/northgate >"$logs/northgate.log" 2>&1 &
  pids+=($!)
fi
bin/worker >"$logs/worker.log" 2>&1 &
pids+=($!)
if [ -n "$cluster" ]; then
  # A second worker on the same task queue, with its own metrics and codec ports.
  METRICS_ADDR=127.0.0.1:9091 CODEC_ADDR=127.0.0.1:8088 bin/worker >"$logs/worker2.log" 2>&1 &
  pids+=($!)
fi
# The MCP server: access tokens from the demo provider, for its resource URL (the provider is told
# before it starts, so a moved MCP_ADDR is the audience and the logout address too).
export MCP_ADDR="${MCP_ADDR:-127.0.0.1:8090}" MCP_OIDC_ISSUER="${MCP_OIDC_ISSUER:-$APPROVALS_OIDC_ISSUER}"
export IDP_MCP_AUDIENCE="${IDP_MCP_AUDIENCE:-http://$MCP_ADDR/mcp}" MCP_AUDIENCE="${MCP_AUDIENCE:-http://$MCP_ADDR/mcp}"
export IDP_MCP_BACKCHANNEL_LOGOUT_URI="${IDP_MCP_BACKCHANNEL_LOGOUT_URI:-http://$MCP_ADDR/backchannel-logout}"
export IDP_USERS_FILE="${IDP_USERS_FILE:-$PWD/.dev/idp-users.json}"
# Its settings, for commands typed in a second shell: bin/starter and bin/idp users read .dev/env while
# this runs (internal/devenv), so nothing there needs a variable set by hand. Removed when it stops.
# A pack file named by a relative path is written as an absolute one, so a command run elsewhere finds it.
packs_abs=""
rm -f .dev/env.new && (umask 077; : >.dev/env.new)
IFS=, read -ra pack_list <<<"$TOOLGATE_PACKS"
for p in "${pack_list[@]}"; do
  case "$p" in /*) ;; *.yaml | *.yml | *.json) p="$PWD/$p" ;; esac
  packs_abs="${packs_abs:+$packs_abs,}$p"
done
{ echo "TOOLGATE_DEV_PID=$$"
  env | grep -E '^(TOOLGATE_|DATABASE_URL=|AUDITOR_DATABASE_URL=|TEMPORAL_|IDP_|MCP_|APPROVALS_|UPSTREAM_|CARDDESK_|PLANCOVER_|NORTHGATE_|CODEC_|METRICS_)' | grep -v '^TOOLGATE_DEV_PID=\|^TOOLGATE_PACKS='
  echo "TOOLGATE_PACKS=$packs_abs"
} >>.dev/env.new
mv .dev/env.new .dev/env
people_files="${PEOPLE:-}"
for people in ${people_files//,/ }; do
  bin/idp users add "$people" >/dev/null   # a pack's people join the demo users (made on the first run)
done
users_table="$(bin/idp users)"   # creates .dev/idp-users.json on the first run
bin/idp >"$logs/idp.log" 2>&1 &
pids+=($!)
bin/approvals >"$logs/approvals.log" 2>&1 &
pids+=($!)
bin/mcp >"$logs/mcp.log" 2>&1 &
pids+=($!)

desk_line="" desk_try=""
if [ -n "$carddesk" ]; then
  desk_line="  card desk      http://$CARDDESK_ADDR   (the file pack examples/packs/carddesk.yaml; tokens exchanged at the provider)
  PlanCover      http://$PLANCOVER_ADDR   (the insurer's member portal, packs/plancover; tokens exchanged at the provider)
  Northgate      http://$NORTHGATE_ADDR   (the bank's card desk, packs/northgate; callers verify, card_ops approve)
  MCP servers    filesystem and memory from npm, over stdio, on $TOOLGATE_SCRATCH   (examples/packs/reference.yaml; keepers approve)
"
  desk_try="      The card desk, through MCP as cara: her client signs in at the provider (bin/starter token --user cara)
      and calls get_card, then replace_card {\"reason\":\"stolen\",\"fee\":2500}; sam approves it in the card UI.
      PlanCover, through MCP as meera: list_my_policies, then find_network_hospitals {\"pin_code\":\"560034\"}.
      Northgate, through MCP as dana: verify_passphrase {\"passphrase\":\"harbour lights\"}, then get_balance;
      verify_one_time_code with bin/northgate code dana, then reissue_card {\"reason\":\"captured\"}; imogen approves it.
      The reference MCP servers, through MCP as noor: files__list_directory {\"path\":\"$TOOLGATE_SCRATCH\"}, then
      files__write_file {\"path\":\"$TOOLGATE_SCRATCH/plan.txt\",\"content\":\"Order 40 cases.\"}; tomas approves it."
fi
team_line=""
if [ -n "${PACKS:-}" ]; then
  team_line="  your packs     $PACKS${team_upstreams:+   (upstreams $team_upstreams, taking tokens the provider exchanges)}
"
fi
cat <<TXT

toolgate is running (logs in $logs/):
  Temporal       $address, namespace $namespace   Web UI http://127.0.0.1:$ui_port/namespaces/$namespace/workflows   ${cluster:+(cluster: history, matching, frontend, worker on PostgreSQL${TOOLGATE_CLUSTER_TLS_DIR:+; mTLS, client profile: TEMPORAL_CONFIG_FILE=$TOOLGATE_CLUSTER_TLS_DIR/temporal.toml TEMPORAL_PROFILE=toolgate})}
  upstream       $UPSTREAM_URL   (Mangrove's demo API)
$desk_line$team_line  worker         task queue ${TOOLGATE_TASK_QUEUE:-toolgate}${TOOLGATE_TASK_QUEUES:+ and, by pack, $TOOLGATE_TASK_QUEUES}${cluster:+ (two workers, metrics on 127.0.0.1:9090 and :9091)}
  codec endpoint http://${CODEC_ADDR:-127.0.0.1:8089}   (Temporal Web decrypts through it)
  card UI        http://${APPROVALS_ADDR:-127.0.0.1:8080}   (sign in at the demo identity provider as one of the users below)
  insights       http://${APPROVALS_ADDR:-127.0.0.1:8080}/insights   (sign in as abena, the auditor; bin/starter register, explain, export-evals)
  identity       $APPROVALS_OIDC_ISSUER   (demo OpenID provider; dev mode only)
  MCP server     http://$MCP_ADDR/mcp   (OAuth: sign in at the demo provider; bin/starter token --user ama prints a token)
  PostgreSQL     $DATABASE_URL
Demo users (passwords and TOTP secrets live in .dev/idp-users.json; bin/idp users prints them again):
$users_table
Try:  bin/starter call --tool get_stock --call-id call1 --args '{"articleId":40211}' \\
        --user ama --role store_manager --stores 112 --conversation c1 --credential cred-ama
$desk_try
Ctrl-C stops everything.
TXT
wait -n "${pids[@]}"
echo "a process of the stack exited; see $logs/*.log" >&2
exit 1
