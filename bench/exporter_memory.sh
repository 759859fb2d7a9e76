#!/usr/bin/env bash
# Peak memory and throughput of each vendor exporter with its default configuration,
# behind a vendor link of 2 MiB/s (slower than the sender, so a backlog builds),
# pushed as fast as the collector acks, into a local sink: otlp -> batch -> exporter,
# 200k and 1M runs (one LangSmith run per span) by default. Fails when an exporter's
# peak RSS grows more than 20 % between the smallest and the largest run count.
#
#   bench/exporter_memory.sh
#   RUNS=100000,500000 EXPORTERS=langsmith bench/exporter_memory.sh
#   SINK_MIBPS=0 bench/exporter_memory.sh      # a sink as fast as it reads: no backlog, the exporters' own pace
#   QUEUE='{sizer: requests, queue_size: 1000, block_on_overflow: false}' bench/exporter_memory.sh   # the old default queue
#   AGENTMETER_COLLECTOR=/path/to/collector bench/exporter_memory.sh
#   AGENTMETER_COLLECTOR=/path/to/older/collector ENABLE=true bench/exporter_memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
RUNS=${RUNS:-200000,1000000}
EXPORTERS=${EXPORTERS:-langsmith,langfuse}
QUEUE=${QUEUE:-}
SINK_MIBPS=${SINK_MIBPS:-2}   # the sink's bandwidth in MiB/s (0: unlimited): below the exporters' pace, so a backlog builds
ENABLE=${ENABLE:-false}   # true: also write enabled: true (for a build older than keys-in-YAML-enable)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

private_collector "$tmp"
go build -o "$tmp/loadgen" ./bench/subagentmerge_loadgen
go build -o "$tmp/exporter_memory" ./bench/exporter_memory
"$tmp/exporter_memory" -collector "$tmp/agentmeter-collector" -loadgen "$tmp/loadgen" \
  -exporters "$EXPORTERS" -runs "$RUNS" -queue "$QUEUE" -enable="$ENABLE" -sink-mibps "$SINK_MIBPS" -dir "$tmp"
