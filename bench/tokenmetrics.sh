#!/usr/bin/env bash
# What the token-metrics path costs, through the built collector, on the same
# DeerFlow-shaped load (bench/subagentmerge_loadgen), one run each:
#   bare:         otlp -> batch -> debug
#   no_metrics:   otlp -> memory_limiter, genainormalize, genaicost, subagentmerge -> debug
#                 (the shipped sidecar's processors, its merge buffer on disk; vendors
#                 replaced by debug)
#   connector:    no_metrics + tokenmetrics -> prometheus (the shipped token metrics)
#   ottl_chain:   no_metrics + forward -> transform -> signal_to_metrics -> delta_to_cumulative
#                 -> prometheus (what otelcol-config.yaml used before the connector,
#                 bench/tokenmetrics/ottl-chain.yaml)
# Prints each run's spans/s (end to end, until debug has sent every span), CPU seconds and
# peak RSS, then the ratios and the metrics path's CPU per span ((run - no_metrics) / spans).
# Usage: bench/tokenmetrics.sh [spans] [collector binary]   (default 300000, bin/agentmeter-collector)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SPANS=${1:-300000}
BIN=${2:-bin/agentmeter-collector}
[ -x "$BIN" ] || make collector
go build -o /tmp/tokenmetrics_loadgen ./bench/subagentmerge_loadgen

declare -A RATE CPU

run() {
  local name=$1 processors=$2 exporters=$3 extra_pipelines=$4 extra_config=$5
  local grpc metrics prom dir pid out
  grpc=$(free_port); metrics=$(free_port); prom=$(free_port); dir=$(mktemp -d)
  cat >"$dir/otelcol.yaml" <<YAML
receivers:
  otlp:
    protocols:
      grpc: {endpoint: 127.0.0.1:$grpc}
processors:
  memory_limiter: {check_interval: 1s, limit_mib: 1024, spike_limit_mib: 256}
  genainormalize: {}
  genaicost: {}
  subagentmerge: {storage: file_storage}
  batch: {timeout: 1s}
extensions:
  file_storage: {directory: $dir/storage, create_directory: true}
connectors:
  tokenmetrics: {}
exporters:
  debug: {verbosity: basic}
  prometheus:
    endpoint: 127.0.0.1:$prom
    metric_expiration: 24h
    resource_to_telemetry_conversion: {enabled: false}
    without_scope_info: true
service:
  extensions: [file_storage]
  telemetry:
    logs: {level: warn}
    metrics:
      level: basic
      readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: $metrics}}}}]
  pipelines:
    traces: {receivers: [otlp], processors: [$processors], exporters: [$exporters]}
$extra_pipelines
YAML
  local args=(--config "$dir/otelcol.yaml")
  [ -n "$extra_config" ] && args+=(--config "$extra_config")
  "$BIN" "${args[@]}" >"$dir/log" 2>&1 &
  pid=$!
  # never leave a collector behind, whatever fails below
  trap 'kill '"$pid"' 2>/dev/null || true' EXIT
  for _ in $(seq 150); do curl -sf "127.0.0.1:$metrics/metrics" >/dev/null && break; sleep 0.1; done
  out=$(/tmp/tokenmetrics_loadgen -endpoint "127.0.0.1:$grpc" -metrics "http://127.0.0.1:$metrics/metrics" \
    -exporters debug -pid "$pid" -spans "$SPANS" -timeout 180s) || { echo "$name failed; log:"; cat "$dir/log"; kill "$pid"; exit 1; }
  # the metrics path really ran: the prometheus exporter shows the token counter
  if [[ $exporters == *tokens* || $exporters == *tokenmetrics* ]]; then
    local scraped
    scraped=$(curl -sf "127.0.0.1:$prom/metrics" || true)
    grep -q '^agentmeter_tokens_total{' <<<"$scraped" || { echo "$name: no agentmeter_tokens_total"; cat "$dir/log"; kill "$pid"; exit 1; }
  fi
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
  printf '%-11s %s\n' "$name" "$out"
  RATE[$name]=$(sed -E 's/.* e2e_spans_per_s=([0-9.]+).*/\1/' <<<"$out")
  CPU[$name]=$(sed -E 's/.* cpu_s=([0-9.]+).*/\1/' <<<"$out")
}

SIDECAR="memory_limiter, genainormalize, genaicost, subagentmerge"
run bare       "batch" "debug" "" ""
run no_metrics "$SIDECAR" "debug" "" ""
run connector  "$SIDECAR" "debug, tokenmetrics" \
  "    metrics: {receivers: [tokenmetrics], exporters: [prometheus]}" ""
run ottl_chain "$SIDECAR" "debug, forward/tokens" \
  "    traces/tokens: {receivers: [forward/tokens], processors: [transform/token_labels], exporters: [signal_to_metrics]}
    metrics/tokens: {receivers: [signal_to_metrics], processors: [delta_to_cumulative], exporters: [prometheus]}" \
  bench/tokenmetrics/ottl-chain.yaml

python3 - "$SPANS" "${RATE[bare]}" "${RATE[no_metrics]}" "${RATE[connector]}" "${RATE[ottl_chain]}" \
  "${CPU[no_metrics]}" "${CPU[connector]}" "${CPU[ottl_chain]}" <<'PY'
import sys
spans = float(sys.argv[1])
bare, nom, con, ottl, cpu_nom, cpu_con, cpu_ottl = map(float, sys.argv[2:])
print(f"connector sidecar / same without token metrics: {con/nom:.2f}x (target >= 0.9)")
print(f"connector sidecar / bare otlp -> batch:         {con/bare:.2f}x (target >= 0.8)")
print(f"ottl-chain sidecar / same without token metrics: {ottl/nom:.2f}x")
print(f"ottl-chain sidecar / bare otlp -> batch:         {ottl/bare:.2f}x")
print(f"connector / ottl chain (spans/s):               {con/ottl:.2f}x")
print(f"metrics path CPU per span: connector {(cpu_con-cpu_nom)/spans*1e6:.2f} us, ottl chain {(cpu_ottl-cpu_nom)/spans*1e6:.2f} us")
PY
