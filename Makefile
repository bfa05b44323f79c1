# Mink's one entry point: every target installs what it needs (pinned Go tools into
# .tmp/bin, PostgreSQL server binaries through apt-get when absent).
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO      ?= go
TMP     := $(CURDIR)/.tmp
BIN     := $(TMP)/bin
export PATH := $(BIN):$(PATH)

BUF_VERSION     := v1.75.0
GRPCURL_VERSION := v1.9.3
STATICCHECK_VERSION := v0.8.2
TEST_TIMEOUT    ?= 20m
# Every package but the interop suite, which make test-interop runs (it needs Node).
PKGS            ?= $(shell $(GO) list ./... | grep -v '/test/interop$$')

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-16s %s\n", $$1, $$2}'

# --- tools -------------------------------------------------------------------------

$(BIN)/buf:
	GOBIN=$(BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)

$(BIN)/grpcurl:
	GOBIN=$(BIN) $(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# protoc plugins at the versions go.mod pins (tool directives).
$(BIN)/protoc-gen-go: go.mod
	$(GO) build -o $@ google.golang.org/protobuf/cmd/protoc-gen-go
$(BIN)/protoc-gen-go-grpc: go.mod
	$(GO) build -o $@ google.golang.org/grpc/cmd/protoc-gen-go-grpc

.PHONY: tools
tools: $(BIN)/buf $(BIN)/grpcurl $(BIN)/staticcheck $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc ## Install the pinned Go tools into .tmp/bin.

.PHONY: postgres
postgres: ## Install PostgreSQL server binaries when absent (tests start private clusters).
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || [ -n "$$MINK_TEST_POSTGRES_URL" ]; then :; \
	else echo "installing PostgreSQL server binaries"; \
		( apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null ) || \
		( echo "could not install PostgreSQL: install it, or set MINK_TEST_POSTGRES_URL" >&2; exit 1 ); fi

.PHONY: chromium
chromium: ## Install Debian's Chromium when absent (the console's tests drive it headless).
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	else echo "installing Chromium"; \
		( apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null ) || \
		( echo "could not install Chromium: install it (apt-get install chromium)" >&2; exit 1 ); fi

# --- code --------------------------------------------------------------------------

.PHONY: generate
generate: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc ## Regenerate gen/ from proto/.
	rm -rf gen
	buf generate

.PHONY: check-generate
check-generate: generate ## Fail when the committed gen/ differs from what proto/ generates.
	@if [ -n "$$(git status --porcelain -- gen)" ]; then \
		git status --porcelain -- gen; echo "gen/ is stale: run 'make generate' and commit" >&2; exit 1; fi

.PHONY: lint
lint: $(BIN)/buf $(BIN)/staticcheck ## gofmt, go vet, staticcheck, the rules of internal/lint (imports, SQL, layout), go mod tidy, buf lint, and static checks of docker-compose.yaml, deploy/.
	@bad=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go' | grep -v '^gen/')); \
		if [ -n "$$bad" ]; then echo "gofmt needed: $$bad" >&2; exit 1; fi
	$(GO) vet ./...
	staticcheck ./...
	$(GO) test -count=1 ./internal/lint
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit" >&2; exit 1; }
	buf lint
	$(GO) test -count=1 ./deploy/...
	@if command -v docker-compose >/dev/null 2>&1; then docker-compose -f docker-compose.yaml config -q; \
	elif docker compose version >/dev/null 2>&1; then docker compose -f docker-compose.yaml config -q; \
	else echo "lint: no docker-compose; skipping 'docker-compose config' (deploy/deploytest still checks the file)"; fi
	@if command -v kubectl >/dev/null 2>&1; then kubectl kustomize deploy/k8s >/dev/null; \
	else echo "lint: no kubectl; skipping 'kubectl kustomize deploy/k8s'"; fi

.PHONY: build
build: ## Build the role binaries (mink-indexer, mink-writer, mink-fileserver) and minkctl into .tmp/bin.
	$(GO) build -o $(BIN)/ ./cmd/...
	for r in indexer writer fileserver; do $(GO) build -o $(BIN)/mink-$$r ./services/$$r || exit 1; done

.PHONY: test
test: postgres chromium $(BIN)/grpcurl ## Run every test (real Postgres, real processes, kfake, a headless browser).
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)

INTEROP_JS := test/interop/js

# npm ci installs exactly the committed lock file; the stamp is what the Go test checks.
$(INTEROP_JS)/node_modules/.mink-npm-ci: $(INTEROP_JS)/package-lock.json $(INTEROP_JS)/package.json
	@command -v npm >/dev/null || { echo "npm not found: the interop suite needs Node 20+ and npm" >&2; exit 1; }
	cd $(INTEROP_JS) && npm ci --no-audit --no-fund
	sha256sum $(INTEROP_JS)/package-lock.json | cut -d' ' -f1 | tr -d '\n' > $@

.PHONY: test-interop
test-interop: postgres $(INTEROP_JS)/node_modules/.mink-npm-ci ## Read a real cluster with third-party clients: icebird, iceberg-js, hyparquet, DuckDB, kafkajs, the AWS SDKs (JS and Go).
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -v ./test/interop

.PHONY: test-race
test-race: postgres $(BIN)/grpcurl ## Run the lease library and server tests with the race detector.
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./pkg/... ./services/...

CHAOS_DURATION ?= 5m
CHAOS_TIMEOUT  ?= 2h

.PHONY: chaos
chaos: postgres ## Run the long randomised fault-injection run (CHAOS_DURATION=5m; MINK_CHAOS_SEED=<seed> replays one).
	MINK_CHAOS_DURATION=$(CHAOS_DURATION) $(GO) test -count=1 -timeout $(CHAOS_TIMEOUT) -run '^TestRandomChaos$$' -v ./test/chaos

BENCH_FLAGS ?=

.PHONY: bench
bench: postgres ## Run the benchmarks beside their baselines and write docs/benchmarks.md (sizes: BENCH_FLAGS, see -h).
	$(GO) run ./bench/cmd/minkbench -out docs/benchmarks.md -work $(TMP)/bench $(BENCH_FLAGS)

.PHONY: dev
dev: build $(BIN)/grpcurl ## Run a local cluster: Postgres, Kafka and a Schema Registry (embedded) under .tmp/dev, 2 indexers, a writer, 2 file servers, a JSON and an Avro demo table, auth on (.tmp/dev/auth.json). Ctrl-C stops it; data stays.
	@if [ -z "$$MINK_POSTGRES_URL" ]; then $(MAKE) --no-print-directory postgres; fi
	$(BIN)/minkdev --dir $(TMP)/dev --bin-dir $(BIN) $(DEV_FLAGS)

.PHONY: clean
clean: ## Remove .tmp (tools, local cluster data).
	rm -rf $(TMP)
