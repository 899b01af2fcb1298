#!/usr/bin/env bash
# make bench-cluster: make bench's end-to-end table and the pending run on a production-shaped Temporal
# (scripts/temporal-cluster.sh: PostgreSQL persistence and visibility, frontend, history, matching and
# worker as separate processes) instead of the dev server. Run under scripts/with-postgres.sh.
# Results go to bench/results/e2e-cluster.{json,md} and pending-cluster.json.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export PATH="$root/bin:$PATH"
dir="$(mktemp -d)"; chmod 755 "$dir"
# Every process reaches the cluster through Temporal's own client configuration, set here; the tests use
# it instead of a dev server of their own (TOOLGATE_TEST_TEMPORAL=configured).
export TEMPORAL_ADDRESS=127.0.0.1:7233 TEMPORAL_NAMESPACE=default TEMPORAL_CONFIG_FILE="$root/internal/testenv/no-temporal-config.toml" TOOLGATE_TEST_TEMPORAL=configured
cleanup() { ./scripts/temporal-cluster.sh stop "$dir/temporal"; rm -rf "$dir"; }
trap cleanup EXIT
TOOLGATE_TEMPORAL_UI=0 ./scripts/temporal-cluster.sh start "$dir/temporal" "${TOOLGATE_TEST_DATABASE_URL:-$DATABASE_URL}"
export TOOLGATE_REQUIRE_SERVICES=1
go test -tags bench -count=1 -timeout 20m -run TestEndToEnd -v ./bench/e2e 2>&1 | grep -E '^(--- |ok|FAIL)|^ +\||end to end'
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
BENCH_PENDING="${BENCH_PENDING:-9570}" go test -tags bench -count=1 -timeout 45m -run TestPendingApprovals -v ./bench/e2e 2>&1 |
  grep -E '^(--- |ok|FAIL)|pending_test'; exit "${PIPESTATUS[0]}"
