# agentmeter — every target sets up what it needs on a fresh machine.
SHELL := /bin/bash
GO ?= go
OCB_VERSION := v0.161.0
BIN := $(CURDIR)/bin
OCB := $(BIN)/ocb
COLLECTOR := $(BIN)/agentmeter-collector
# the race detector on everything: the runtime and the collector components are concurrent
TEST_FLAGS ?= -race -count=1 -timeout 25m

.PHONY: all build collector test test-deps vet fmt-check bench bench-compare clean ocb generate check-generated

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
	@cd _build && bad=$$($(GO) list -m all | grep -E '^go.opentelemetry.io/collector' | grep -vE ' (v1\.67\.0|v0\.161\.0)$$' || true); \
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
	$(GO) vet ./...

fmt-check:
	@files=$$(git ls-files --cached --others --exclude-standard '*.go'); \
	out=$$([ -z "$$files" ] || gofmt -l $$files); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Programs the tests run for real (Prometheus, PostgreSQL, the vendor JS SDKs).
test-deps:
	@scripts/test-deps.sh

# End-to-end tests use bin/agentmeter-collector, so it is built first.
test: test-deps collector build fmt-check vet
	AGENTMETER_COLLECTOR=$(COLLECTOR) AGENTMETER_BIN=$(BIN)/agentmeter $(GO) test $(TEST_FLAGS) ./...

bench: collector build
	AGENTMETER_COLLECTOR=$(COLLECTOR) AGENTMETER_BIN=$(BIN)/agentmeter $(GO) test -tags e2e -run '^$$' -bench . -benchmem -count=1 ./...

# docs/performance.md, measured on this machine: each of our components against what a user
# would pick instead, in one run (bench/compare.sh; about 20 minutes, loopback only).
# BENCH_SMOKE=1 BENCH_OUT=/tmp/p.md make bench-compare is a quick check with tiny counts.
bench-compare: collector
	AGENTMETER_COLLECTOR=$(COLLECTOR) bench/compare.sh

clean:
	rm -rf $(BIN) _build

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
