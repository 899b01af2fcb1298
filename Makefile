# toolgate — `make dev` runs the whole stack, `make test` runs every test.
SHELL := /bin/bash
export PATH := $(CURDIR)/bin:$(PATH)
export GOBIN := $(CURDIR)/bin

TEMPORAL_VERSION    := v1.5.1
# The Temporal server and Web UI of make cluster: the versions the CLI's dev server embeds.
TEMPORAL_SERVER_VERSION := v1.29.1
TEMPORAL_UI_VERSION     := v2.42.1
STATICCHECK_VERSION := v0.7.0
WORKFLOWCHECK_VER   := v0.6.0
# DATABASE_URL: set it to use your own server; unset, make dev and make test run a
# private cluster (scripts/pg.sh) and never touch the machine's.
WITH_PG             := ./scripts/with-postgres.sh

.PHONY: mcp-servers cluster cluster-tools test-cluster bench-cluster dev test test-all node lint unit tools temporal migrate build clean prove golden browser screenshot reset fuzz chaos bench bench-policy bench-mcp bench-pending bench-cards bench-scale

## dev: run the stack on this machine (dev server + Web UI, migrations, upstream, worker).
dev: tools build mcp-servers
	./scripts/dev.sh

## mcp-servers: the MCP reference servers make dev stands toolgate in front of (examples/mcp, pinned by its lock file).
mcp-servers: examples/mcp/node_modules/.package-lock.json
examples/mcp/node_modules/.package-lock.json: examples/mcp/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "installing Debian's nodejs and npm"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	npm ci --prefix examples/mcp --no-audit --no-fund --loglevel=error

## cluster: the same stack on a production-shaped Temporal: the server built from go.temporal.io/server on
## PostgreSQL (persistence and visibility), frontend, history, matching and worker as separate processes,
## the Web UI, and two toolgate workers (scripts/temporal-cluster.sh, deploy/temporal/cluster.yaml).
cluster: tools cluster-tools build
	TOOLGATE_CLUSTER=1 ./scripts/dev.sh

## test-cluster: the integration and chaos suites against make cluster's Temporal (a fresh one on a private
## PostgreSQL); the chaos run also kills a Temporal service (history or matching) and one of two workers.
test-cluster: tools cluster-tools browser node build
	$(WITH_PG) ./scripts/test-cluster.sh

## cluster-tools: the Temporal server, its SQL schema tool and the Web UI server, into bin/ from the module proxy.
cluster-tools: bin/temporal-server bin/temporal-sql-tool bin/temporal-ui-server

bin/temporal-server:
	GOBIN=$(CURDIR)/.gobin/server go install go.temporal.io/server/cmd/server@$(TEMPORAL_SERVER_VERSION) && mkdir -p bin && mv .gobin/server/server $@

bin/temporal-sql-tool:
	GOBIN=$(CURDIR)/.gobin/sql go install go.temporal.io/server/cmd/tools/sql@$(TEMPORAL_SERVER_VERSION) && mkdir -p bin && mv .gobin/sql/sql $@

bin/temporal-ui-server:
	GOBIN=$(CURDIR)/.gobin/ui go install github.com/temporalio/ui-server/v2/cmd/server@$(TEMPORAL_UI_VERSION) && mkdir -p bin && mv .gobin/ui/server $@

## test: lint, then every test with the real dev server, PostgreSQL and Chromium (nothing skips).
test: tools browser node lint
	$(WITH_PG) $(MAKE) test-all

## node: the npm packages of the tests that drive toolgate from other languages (official SDKs) and of the MCP servers it stands in front of (the reference servers), and the official MCP conformance suite, pinned by package-lock.json.
node:
	@command -v npm >/dev/null 2>&1 || { echo "installing Debian's nodejs and npm"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	npm ci --prefix mcpgate/testdata/client --no-audit --no-fund --loglevel=error
	npm ci --prefix mcpgate/testdata/client2 --no-audit --no-fund --loglevel=error
	npm ci --prefix mcpgate/testdata/conformance --no-audit --no-fund --loglevel=error
	npm ci --prefix examples/temporal-ts --no-audit --no-fund --loglevel=error
	npm ci --prefix examples/mcp --no-audit --no-fund --loglevel=error

# make test always runs its own dev server: the Temporal client configuration of your shell (TEMPORAL_*, a
# profile in your temporal.toml) is for make test-cluster, so every process the tests start is kept from it.
NO_TEMPORAL_ENV = env $$(compgen -e | sed -n 's/^\(TEMPORAL_.*\)$$/-u \1/p') -u TOOLGATE_TEST_TEMPORAL TEMPORAL_CONFIG_FILE=$(CURDIR)/internal/testenv/no-temporal-config.toml
# -vet=off: lint has run go vet over everything; -ldflags=-w: no test reads DWARF, whose writing is a
# third or more of linking each test binary; -timeout=20m: the approvals package, which runs make dev
# itself several times under -race, nears go test's 10-minute default on a loaded two-core machine,
# and a hung test is still stopped.
test-all:
	$(NO_TEMPORAL_ENV) TOOLGATE_REQUIRE_SERVICES=1 go test -race -count=1 -timeout=20m -vet=off -ldflags=-w ./...
	$(MAKE) fuzz FUZZ_AUTHORIZE=20000x FUZZ_SANITIZE=5000x FUZZ_PLAN=20000x
	$(MAKE) chaos CHAOS_CALLS=60

## unit: the tests that need no service.
unit:
	go test ./policy ./sanitize

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	staticcheck ./...
	workflowcheck -config .workflowcheck.yaml ./...
	python3 scripts/prove.py --check
	$(MAKE) --no-print-directory bench-build

build:
	go build -o bin/ ./cmd/... ./worker ./starter

migrate:
	@test -n "$$DATABASE_URL" || { echo "set DATABASE_URL (make dev migrates its private cluster itself)"; exit 1; }
	go run ./starter migrate

## browser: Debian's Chromium for the card UI's browser tests, unless one is installed.
browser:
	@if command -v chromium >/dev/null 2>&1 || [ -n "$$CHROMIUM" ]; then echo "using $$(command -v chromium || echo $$CHROMIUM)"; \
	else echo "installing Debian's chromium"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; fi

## screenshot: the card UI as docs/card.png and the insights page as docs/insights.png, from the browser tests.
screenshot: tools browser
	$(WITH_PG) env TOOLGATE_REQUIRE_SERVICES=1 TOOLGATE_SCREENSHOT=$(CURDIR)/docs/card.png TOOLGATE_SCREENSHOT_INSIGHTS=$(CURDIR)/docs/insights.png \
		go test -count=1 -run 'TestCardUIInABrowser|TestInsightsInABrowser' ./approvals

## tools: the Temporal CLI (unless one is on PATH), staticcheck and workflowcheck, into bin/.
tools: temporal bin/staticcheck bin/workflowcheck

# bin/temporal is always there, so the docs' commands can name it: the CLI on PATH, linked, or one built.
temporal:
	@mkdir -p bin; if [ -x bin/temporal ]; then echo "using bin/temporal"; \
	elif command -v temporal >/dev/null 2>&1; then ln -sf "$$(command -v temporal)" bin/temporal; echo "using $$(command -v temporal) (as bin/temporal)"; \
	else echo "building the Temporal CLI $(TEMPORAL_VERSION) into bin/: the first build takes 5 to 15 minutes on two cores, later ones a few seconds from Go's build cache"; \
	./scripts/progress.sh go install -v github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_VERSION); fi

bin/staticcheck:
	go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

bin/workflowcheck:
	go install go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VER)

## reset: forget the dev stack's state (toolgate database, Temporal history, keys) so the demo numbers start over.
reset:
	@if [ -n "$$DATABASE_URL" ]; then psql "$$(echo "$$DATABASE_URL" | sed 's|/toolgate?|/postgres?|')" -c 'DROP DATABASE IF EXISTS toolgate WITH (FORCE)'; fi
	-./scripts/pg.sh stop .dev/pg
	rm -rf .dev

clean:
	rm -rf bin .dev .gobin

## chaos: mixed calls while the worker is SIGKILLed at random and the upstream and PostgreSQL restart once each
## (make test runs 60 calls). It restarts only a private cluster; with your own DATABASE_URL it leaves PostgreSQL alone.
CHAOS_CALLS ?= 300
chaos: tools
	$(WITH_PG) $(NO_TEMPORAL_ENV) TOOLGATE_REQUIRE_SERVICES=1 CHAOS_CALLS=$(CHAOS_CALLS) go test -tags chaos -count=1 -timeout 30m -run TestChaos -v ./bench/chaos 2>&1 | grep -E '^(=== RUN|--- |ok|FAIL|PASS)|chaos' ; exit $${PIPESTATUS[0]}

## fuzz: the chain, the plan against the reflective decoder, and the sanitizer under go test -fuzz
## (make test runs a short pass).
FUZZ_AUTHORIZE ?= 1000000x
FUZZ_PLAN      ?= 1000000x
FUZZ_SANITIZE  ?= 300000x
fuzz:
	go test -run='^$$' -fuzz=FuzzAuthorize -fuzztime=$(FUZZ_AUTHORIZE) ./policy
	go test -run='^$$' -fuzz=FuzzPlanAgrees -fuzztime=$(FUZZ_PLAN) ./toolargs
	go test -run='^$$' -fuzz=FuzzResult -fuzztime=$(FUZZ_SANITIZE) ./sanitize

## bench: toolgate against a bare workflow end to end (same dev server, upstream, PostgreSQL; interleaved),
## then the policy engines, then 10,000 pending approvals (about 20 minutes; BENCH_PENDING=1000 for a short
## run). Raw figures and the chart go to bench/results/.
bench: tools
	$(WITH_PG) env TOOLGATE_REQUIRE_SERVICES=1 go test -tags bench -count=1 -timeout 20m -run TestEndToEnd -v ./bench/e2e 2>&1 | grep -E '^(--- |ok|FAIL)|^ +\||end to end' ; exit $${PIPESTATUS[0]}
	cd bench/engines && go run ./chart
	$(MAKE) bench-policy
	$(MAKE) bench-mcp
	$(MAKE) bench-pending

## bench-cluster: make bench's end-to-end table and the 10,000-pending run on make cluster's Temporal (a fresh one
## on a private PostgreSQL), against the bare workflow on the same cluster. About 30 minutes.
bench-cluster: tools cluster-tools
	$(WITH_PG) ./scripts/bench-cluster.sh

## bench-mcp: an allowed read through the MCP server against the same read through the Go client, interleaved; and
## toolgate as a gateway in front of the official filesystem server, against the same tools/call made straight to
## the server and against a bare workflow whose one activity makes it (bench/results/mcp.md, mcp-gateway.md).
bench-mcp: tools node
	$(WITH_PG) env TOOLGATE_REQUIRE_SERVICES=1 go test -tags bench -count=1 -timeout 10m -run 'TestMCPLatency|TestMCPGatewayLatency' -v ./bench/e2e 2>&1 | grep -E '^(--- |ok|FAIL)|mcp_test|gateway_test' ; exit $${PIPESTATUS[0]}

## bench-pending: 10,000 cards pending at once (a bench-only table lifts the transfer limits), worker RSS and
## how late each expires (BENCH_PENDING_RATE=cards per second caps the starts). About 15 minutes.
bench-pending: tools
	$(WITH_PG) env TOOLGATE_REQUIRE_SERVICES=1 BENCH_PENDING=$${BENCH_PENDING:-9570} go test -tags bench -count=1 -timeout 45m -run TestPendingApprovals -v ./bench/e2e 2>&1 | grep -E '^(--- |ok|FAIL)|pending_test' ; exit $${PIPESTATUS[0]}

## bench-cards: cards put up by 32 concurrent callers, and the CPU each takes in toolgate, the Temporal server and
## PostgreSQL (BENCH_CPUPROFILE=file writes toolgate's CPU profile, BENCH_WINDOW=seconds sets the window).
bench-cards: tools
	$(WITH_PG) env TOOLGATE_REQUIRE_SERVICES=1 go test -tags bench -count=1 -timeout 10m -run TestCardThroughput -v ./bench/e2e 2>&1 | grep -E '^(--- |ok|FAIL)|cards' ; exit $${PIPESTATUS[0]}

## bench-scale: what reads of the audit log and the cards cost as the log grows: a retailer's history loaded to 0, 1M
## and 5M audit rows (BENCH_SCALE_ROWS) into one fresh database, and at each size the hot- and quiet-bucket admission,
## the inbox at 0/10k/100k pending, the insights page for 1 and 30 days, and an allowed read's and an approval's
## p50 against a bare workflow (bench/results/scale.md). About 5 minutes and 4 GB of disk.
bench-scale: tools
	$(WITH_PG) env TOOLGATE_REQUIRE_SERVICES=1 go test -tags bench -count=1 -timeout 120m -run TestScale -v ./bench/e2e 2>&1 | grep -E '^(--- |ok|FAIL)|^ +\||scale' ; exit $${PIPESTATUS[0]}

## bench-policy: the decision in toolgate, a hand-written floor, cedar-go and OPA (separate module under bench/).
bench-policy:
	cd bench/engines && go test -count=1 -run TestEnginesAgree .
	cd bench/engines && go test -run='^$$' -bench=. -benchtime=2s .
	go test -run='^$$' -bench='Authorize' -benchtime=2s ./policy

## bench-build: every bench compiles and none runs: the bench- and chaos-tagged suites, which go vet ./...
## does not see, and bench/engines, a module of its own, with its chart program. make lint runs it, so a
## bench that no longer builds fails CI rather than the next make bench.
.PHONY: bench-build
bench-build:
	go vet -tags bench ./bench/e2e
	go vet -tags chaos ./bench/chaos
	go test -tags bench -c -o /dev/null ./bench/e2e
	go test -tags chaos -c -o /dev/null ./bench/chaos
	cd bench/engines && go vet ./... && go test -c -o /dev/null . && go build -o /dev/null ./chart

## prove: remove each guard in turn, in copies of the tree (PROVE_JOBS=2 at a time), and show its tests fail every time.
prove: tools
	$(WITH_PG) python3 scripts/prove.py

## golden: record the golden histories under workflows/testdata/golden from a real run (commit them).
golden: tools
	$(WITH_PG) env TOOLGATE_REQUIRE_SERVICES=1 TOOLGATE_RECORD_GOLDEN=1 go test -count=1 -run RecordGoldenHistories ./workflows
