#!/usr/bin/env bash
# make test-cluster: the integration and chaos suites against a production-shaped Temporal
# (scripts/temporal-cluster.sh) instead of the dev server. Run under scripts/with-postgres.sh: the
# cluster keeps its databases (temporal, temporal_visibility) on the same PostgreSQL as the tests',
# and the chaos run restarts it, kills one of two workers at random and kills one Temporal service
# (history or matching) once. Then the same cluster in mTLS mode, for the processes configured by
# Temporal's client configuration alone. Nothing skips: a missing service fails the run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export PATH="$root/bin:$PATH"
dir="$(mktemp -d)"; chmod 755 "$dir"
# Every process reaches the cluster through Temporal's own client configuration, set here; the tests use
# it instead of a dev server of their own (TOOLGATE_TEST_TEMPORAL=configured).
export TEMPORAL_ADDRESS=127.0.0.1:7233 TEMPORAL_NAMESPACE=default TEMPORAL_CONFIG_FILE="$root/internal/testenv/no-temporal-config.toml" TOOLGATE_TEST_TEMPORAL=configured
pg="${TOOLGATE_TEST_DATABASE_URL:-$DATABASE_URL}"
cleanup() { ./scripts/temporal-cluster.sh stop "$dir/temporal"; ./scripts/temporal-cluster.sh stop "$dir/temporal-tls"; rm -rf "$dir"; }
trap cleanup EXIT
TOOLGATE_TEMPORAL_UI=0 ./scripts/temporal-cluster.sh start "$dir/temporal" "$pg"
export TOOLGATE_REQUIRE_SERVICES=1 TOOLGATE_TEMPORAL_CLUSTER_DIR="$dir/temporal"
go test -race -count=1 ./...
CHAOS_CALLS="${CHAOS_CALLS:-60}" go test -tags chaos -count=1 -timeout 30m -run TestChaos -v ./bench/chaos 2>&1 |
  grep -E '^(=== RUN|--- |ok|FAIL|PASS)|chaos'
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1

# mTLS: the cluster again, its frontend now demanding client certificates (starter dev-certs), in a
# namespace of its own; a worker and a starter configured only by TEMPORAL_TLS_* variables, then only by
# the client profile the script wrote, complete a call there (TestProcessesConfiguredByTemporalsOwnSettings).
./scripts/temporal-cluster.sh stop "$dir/temporal"
for _ in $(seq 60); do (exec 3<>/dev/tcp/127.0.0.1/7233) 2>/dev/null || break; sleep 0.5; done
TEMPORAL_NAMESPACE=toolgate-tls TOOLGATE_CLUSTER_TLS_DIR="$dir/tls" TOOLGATE_TEMPORAL_UI=0 ./scripts/temporal-cluster.sh start "$dir/temporal-tls" "$pg"
env -u TOOLGATE_TEST_TEMPORAL -u TEMPORAL_ADDRESS -u TEMPORAL_NAMESPACE TOOLGATE_TEST_TLS_PROFILE="$dir/tls/temporal.toml" \
  go test -count=1 -run TestProcessesConfiguredByTemporalsOwnSettings -v ./internal/startup 2>&1 | grep -E '^(=== RUN|--- |    --- |ok|FAIL|PASS)|temporalconfig'
exit "${PIPESTATUS[0]}"
