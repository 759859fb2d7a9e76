# agentmeter — every target sets up what it needs on a fresh machine.
SHELL := /bin/bash
GO ?= go
# The collector release of the distribution (docs/toolchain.md): core beta modules and ocb,
# core stable modules, contrib. scripts/set-release.sh moves go.mod, builder-config.yaml,
# these lines and mdatagen's pin together.
COLLECTOR_CORE := v0.161.0
COLLECTOR_STABLE := v1.67.0
COLLECTOR_CONTRIB := v0.161.0
# The newer release our components are also built and unit-tested at (make release-compat).
COMPAT_CORE := v0.165.0
COMPAT_STABLE := v1.71.0
COMPAT_CONTRIB := v0.165.1
OCB_VERSION := $(COLLECTOR_CORE)
BIN := $(CURDIR)/bin
OCB := $(BIN)/ocb
COLLECTOR := $(BIN)/agentmeter-collector
# the race detector on everything: the runtime and the collector components are concurrent
TEST_FLAGS ?= -race -count=1 -timeout 25m
# End-to-end tests (the ocb-built collector, Prometheus, PostgreSQL, node) carry this build
# tag; plain `go test ./...` is the unit suite (docs/testing.md).
E2E_TAGS := -tags e2e

.PHONY: all build collector test test-unit test-deps vet lint fmt-check bench bench-compare clean ocb generate check-generated release-compat

all: build collector

# ocb installs as "builder"; keep it under its own name so other builders don't clash.
$(OCB):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION)
	mv $(BIN)/builder $(OCB)

ocb: $(OCB)

# The distribution: ocb generates _build/ (its own go.mod, replace => ..) and compiles it.
collector: $(OCB)
	$(OCB) --config builder-config.yaml
	cp _build/agentmeter-collector $(COLLECTOR)
	@$(MAKE) --no-print-directory check-collector-versions

# docs/toolchain.md: our root module must never raise a collector module.
check-collector-versions:
	@cd _build && bad=$$($(GO) list -m all | grep -E '^go.opentelemetry.io/collector' | grep -vE ' ($(subst .,\.,$(COLLECTOR_STABLE))|$(subst .,\.,$(COLLECTOR_CORE)))$$' || true); \
	if [ -n "$$bad" ]; then echo "collector modules off the pinned release:"; echo "$$bad"; exit 1; fi

# Generated component code (internal/metadata, lifecycle tests, documentation.md) comes
# from each component's metadata.yaml: mdatagen runs through `go tool` with the tools
# module in internal/tools, so its version is pinned there and the root module's
# collector versions are untouched.
generate:
	$(GO) generate ./...

# CI: generated files must match metadata.yaml. What `go generate` changes or adds is
# compared with the tree as it was before (so files a setup step left are not blamed).
check-generated:
	@before=$$(git status --porcelain --untracked-files=all); \
	$(GO) generate ./... || exit 1; \
	after=$$(git status --porcelain --untracked-files=all); \
	if [ "$$before" != "$$after" ]; then echo "generated files are stale; run make generate and commit:"; \
	  diff <(echo "$$before") <(echo "$$after"); git diff --stat; exit 1; fi

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/agentmeter ./cmd/agentmeter

vet:
	$(GO) vet $(E2E_TAGS) ./...

# staticcheck, pinned in internal/tools/go.mod like mdatagen; over the e2e files too.
lint:
	$(GO) tool -modfile=internal/tools/go.mod staticcheck $(E2E_TAGS) ./...

fmt-check:
	@files=$$(git ls-files --cached --others --exclude-standard '*.go'); \
	out=$$([ -z "$$files" ] || gofmt -l $$files); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Programs the tests run for real (Prometheus, PostgreSQL, the vendor JS SDKs).
test-deps:
	@scripts/test-deps.sh

# End-to-end tests use bin/agentmeter-collector, so it is built first.
test: test-deps collector build fmt-check vet
	AGENTMETER_COLLECTOR=$(COLLECTOR) AGENTMETER_BIN=$(BIN)/agentmeter $(GO) test $(E2E_TAGS) $(TEST_FLAGS) ./...

# The fast inner loop: unit tests only, nothing to install or build first.
test-unit:
	$(GO) test -race -count=1 ./...

# Our components built and unit-tested at a newer collector release than the
# distribution's (docs/toolchain.md); the work tree is not changed.
release-compat:
	scripts/release-compat.sh

bench: collector build
	AGENTMETER_COLLECTOR=$(COLLECTOR) AGENTMETER_BIN=$(BIN)/agentmeter $(GO) test $(E2E_TAGS) -run '^$$' -bench . -benchmem -count=1 ./...

# docs/performance.md, measured on this machine: each of our components against what a user
# would pick instead, in one run (bench/compare.sh; about 20 minutes, loopback only).
# BENCH_SMOKE=1 BENCH_OUT=/tmp/p.md make bench-compare is a quick check with tiny counts.
bench-compare: collector
	AGENTMETER_COLLECTOR=$(COLLECTOR) bench/compare.sh

clean:
	rm -rf $(BIN) _build

# The embedded price snapshot (pricing/genai-prices.json) from the @pydantic/genai-prices
# version pinned in test/genai-prices/package-lock.json, with its version and publication
# date (asked of the npm registry). Commit the result with the package-lock.json change.
.PHONY: prices
prices:
	cd test/genai-prices && npm ci --no-audit --no-fund
	cd test/genai-prices && node snapshot.mjs > ../../pricing/genai-prices.json.tmp
	mv pricing/genai-prices.json.tmp pricing/genai-prices.json
	$(GO) test -count=1 -run 'TestDefaultTableLoads|TestOverridesAreExplained' ./pricing

# The README's main command: the scripted demo through the collector sidecar, offline.
# Builds both binaries, then cmd/demoreport starts the collector (otelcol-config.yaml plus a
# file exporter), runs `agentmeter run --json`, prints the answer, the per-call usage table
# and the agentmeter_tokens_total lines from :8889/metrics, stops the collector, and exits
# non-zero when the journal, the exported spans and Prometheus disagree.
# DEMO_FLAGS passes flags through, e.g. DEMO_FLAGS="-runs 3 -keep".
.PHONY: demo
demo: collector build
	$(GO) build -o $(BIN)/demoreport ./cmd/demoreport
	$(BIN)/demoreport -collector $(COLLECTOR) -agentmeter $(BIN)/agentmeter -config otelcol-config.yaml $(DEMO_FLAGS)
