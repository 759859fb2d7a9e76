#!/usr/bin/env bash
# `make bench-compare`: every comparison of docs/performance.md in one run on this machine
# (our components against contrib groupbytrace, the stock otlphttp exporter, the stock otlp
# receiver and a bare collector; the middleware chain; the gateway), loopback only, and
# writes the page. bench/compare/main.go says what is measured and how.
#
#   bench/compare.sh                          # full: about 20 minutes, writes docs/performance.md
#   BENCH_SMOKE=1 BENCH_OUT=/tmp/p.md bench/compare.sh   # tiny counts, a minute or two
#   BENCH_REPEATS=5 bench/compare.sh          # more repeats (default 3; smoke 1)
#   AGENTMETER_COLLECTOR=/path/to/collector bench/compare.sh   # skip `make collector`
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
OUT=${BENCH_OUT:-docs/performance.md}
smoke=""
if [ -n "${BENCH_SMOKE:-}" ] && [ "${BENCH_SMOKE}" != 0 ]; then smoke=1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

private_collector "$tmp"
go build -o "$tmp/loadgen" ./bench/subagentmerge_loadgen
go build -o "$tmp/compare" ./bench/compare

args=(-repo . -collector "$tmp/agentmeter-collector" -loadgen "$tmp/loadgen" -out "$OUT")
limit=32m
if [ -n "$smoke" ]; then args+=(-smoke); limit=14m; fi
if [ -n "${BENCH_REPEATS:-}" ]; then args+=(-repeats "$BENCH_REPEATS"); fi
# every step has its own timeout inside; this is the backstop for the whole run
timeout --kill-after=30s "$limit" "$tmp/compare" "${args[@]}"
