#!/usr/bin/env bash
# make test-cluster: the integration and chaos suites against a production-shaped Temporal
# (scripts/temporal-cluster.sh) instead of the dev server. Run under scripts/with-postgres.sh: the
# cluster keeps its databases (temporal, temporal_visibility) on the same PostgreSQL as the tests',
# and the chaos run restarts it, kills one of two workers at random and kills one Temporal service
# (history or matching) once. Nothing skips: a missing service fails the run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export PATH="$root/bin:$PATH"
dir="$(mktemp -d)"; chmod 755 "$dir"
# Every process reaches the cluster through Temporal's own client configuration, set here; the tests use
# it instead of a dev server of their own (TOOLGATE_TEST_TEMPORAL=configured).
export TEMPORAL_ADDRESS=127.0.0.1:7233 TEMPORAL_NAMESPACE=default TEMPORAL_CONFIG_FILE=/dev/null TOOLGATE_TEST_TEMPORAL=configured
cleanup() { ./scripts/temporal-cluster.sh stop "$dir/temporal"; rm -rf "$dir"; }
trap cleanup EXIT
TOOLGATE_TEMPORAL_UI=0 ./scripts/temporal-cluster.sh start "$dir/temporal" "${TOOLGATE_TEST_DATABASE_URL:-$DATABASE_URL}"
export TOOLGATE_REQUIRE_SERVICES=1 TOOLGATE_TEMPORAL_CLUSTER_DIR="$dir/temporal"
go test -race -count=1 ./...
CHAOS_CALLS="${CHAOS_CALLS:-60}" go test -tags chaos -count=1 -timeout 30m -run TestChaos -v ./bench/chaos 2>&1 |
  grep -E '^(=== RUN|--- |ok|FAIL|PASS)|chaos'; exit "${PIPESTATUS[0]}"
