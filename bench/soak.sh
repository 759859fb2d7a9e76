#!/usr/bin/env bash
# Soak: the ocb-built collector at a steady rate for an hour (configurable) through both
# vendor exporters (Langfuse, LangSmith), each with a file_storage persistent queue, in
# front of fault-injecting fake vendors (internal/fakevendor/faulty). Every REPORT it
# prints the collector's RSS (and peak, sampled every second), its Go heap, the
# exporters' queue sizes (the collector's own otelcol_exporter_queue_size), spans sent,
# spans each vendor accepted, duplicates and the sender's retryable refusals; at the end it drains the queues and fails when any span the
# collector accepted is missing at a vendor, or the token sums differ.
#
#   bench/soak.sh                                  # 1 h at 100 runs/s (300 spans/s)
#   DURATION=10m REPORT=1m bench/soak.sh
#   RATE=200 LIMIT_MIB=128 bench/soak.sh
#   FAULT_EVERY=2m FAULT_FOR=10s bench/soak.sh     # a 503 outage at both vendors every 2 min
#   AGENTMETER_COLLECTOR=/path/to/collector bench/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
DURATION=${DURATION:-1h}
REPORT=${REPORT:-1m}
RATE=${RATE:-100}
PER_REQUEST=${PER_REQUEST:-10}
LIMIT_MIB=${LIMIT_MIB:-256}
FAULT_EVERY=${FAULT_EVERY:-0}
FAULT_FOR=${FAULT_FOR:-10s}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

private_collector "$tmp"
go build -o "$tmp/soak" ./bench/soak
"$tmp/soak" -collector "$tmp/agentmeter-collector" -duration "$DURATION" -every "$REPORT" -rate "$RATE" \
  -per-request "$PER_REQUEST" -limit-mib "$LIMIT_MIB" -fault-every "$FAULT_EVERY" -fault-for "$FAULT_FOR" \
  -dir "$tmp/work"
