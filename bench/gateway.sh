#!/usr/bin/env bash
# Gateway load test: `agentmeter serve` on the scripted model, 500 concurrent runs across
# 50 threads (POST ?wait=true, all in flight at once), then checks through the API that
# every run row is complete, none is lost or duplicated, and each thread's token-usage
# equals the sum of its runs' journals. Prints runs/s and latency percentiles.
#
# A thread runs one run at a time, so the runs of a thread are queued
# (gateway.multitask_strategy: enqueue) and run in order. HISTORY=on (the default, as
# gateway.thread_history): every run loads and saves its thread's state and its model
# request carries the thread's earlier runs; the check then also reads every thread's
# state. HISTORY=both measures the same load twice in one invocation, history off then on.
#
# REPLICAS=2 (PostgreSQL only) starts two `agentmeter serve` processes on the one
# database and posts each thread's successive runs to successive replicas, as a load
# balancer without sticky routing would; REPLICAS=both measures one replica, then two, in one invocation.
#
#   bench/gateway.sh                      # SQLite (the default store), thread history on
#   HISTORY=both bench/gateway.sh         # off, then on (or HISTORY=off)
#   STORE=postgres bench/gateway.sh       # PostgreSQL: PG_DSN or AGENTMETER_POSTGRES_DSN
#   STORE=postgres REPLICAS=both bench/gateway.sh   # one replica, then two
#   RUNS=1000 THREADS=100 bench/gateway.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-500}
THREADS=${THREADS:-50}
STORE=${STORE:-sqlite}
DELAY=${DELAY:-50ms}
HISTORY=${HISTORY:-on}
REPLICAS=${REPLICAS:-1}
tmp=$(mktemp -d)
pids=""
stop_replicas() {
  for p in $pids; do
    if kill -0 "$p" 2>/dev/null; then kill -TERM "$p"; wait "$p" || true; fi
  done
  pids=""
}
cleanup() {
  stop_replicas
  rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/agentmeter" ./cmd/agentmeter
go build -o "$tmp/load" ./bench/gateway_load

# Every run: one lead call (with a delay so runs overlap) and the title middleware's call.
cat > "$tmp/script.yaml" <<YAML
conversations:
  - name: lead
    caller: lead_agent
    per_user_message: true
    turns:
      - content: "bench answer"
        delay: $DELAY
        usage: {input: 1200, output: 80, cache_read: 1024}
  - name: middleware
    caller: "middleware:*"
    turns:
      - content: "Bench title"
        usage: {input: 150, output: 6}
YAML

case "$STORE" in
  sqlite) store_yaml="store:
  driver: sqlite
  dsn: $tmp/data/agentmeter.db" ;;
  postgres)
    dsn=${PG_DSN:-${AGENTMETER_POSTGRES_DSN:-}}
    if [ -z "$dsn" ]; then echo "STORE=postgres needs PG_DSN or AGENTMETER_POSTGRES_DSN (a database the role owns; .ci/setup.d/40-postgres.sh exports it)"; exit 2; fi
    export AGENTMETER_BENCH_PG_DSN=$dsn
    store_yaml="store:
  driver: postgres
  dsn_env: AGENTMETER_BENCH_PG_DSN" ;;
  *) echo "STORE must be sqlite or postgres"; exit 2 ;;
esac

export AGENTMETER_BENCH_KEY="bench-$(date +%s%N)"
case "$HISTORY" in
  both) modes="off on" ;;
  on|off) modes=$HISTORY ;;
  *) echo "HISTORY must be on, off or both"; exit 2 ;;
esac
case "$REPLICAS" in
  both) counts="1 2" ;;
  [1-9]) counts=$REPLICAS ;;
  *) echo "REPLICAS must be a number of replicas (1-9) or both"; exit 2 ;;
esac
if [ "$counts" != 1 ] && [ "$STORE" != postgres ]; then
  echo "REPLICAS above 1 needs STORE=postgres: a SQLite store serves one process"; exit 2
fi

rc=0
for n in $counts; do
for mode in $modes; do
  history=false
  [ "$mode" = on ] && history=true
  if [ "$STORE" = sqlite ]; then
    rm -rf "$tmp/data"
    store_yaml="store:
  driver: sqlite
  dsn: $tmp/data/agentmeter-$mode.db"
  fi
  cat > "$tmp/config.yaml" <<YAML
models:
  - name: main
    provider: scripted
    model: scripted-bench
    script: $tmp/script.yaml
    context_window: 128000
sandbox:
  root: $tmp/threads
settings:
  runtime: {base_dir: $tmp/base}
telemetry:
  enabled: false
gateway:
  listen: 127.0.0.1:0
  # a thread runs one run at a time: runs posted to a busy thread wait their turn
  # (with the default, reject, all but the first of each thread would get 409)
  multitask_strategy: enqueue
  # on: each run continues its thread (the scripted lead turn is per_user_message, so
  # every run answers the same way); off: every run a fresh conversation
  thread_history: $history
  api_keys:
    - key_env: AGENTMETER_BENCH_KEY
      # a user of its own per pass: a run's budget baseline sums its user's earlier
      # runs, so a pass on a shared database would pay for the passes before it
      user_id: bench-$n-$mode-$(date +%s)
      scopes: [threads:read, threads:write]
$store_yaml
YAML
  urls=""
  for i in $(seq 1 "$n"); do
    log="$tmp/serve-$i.log"
    : > "$log"
    "$tmp/agentmeter" serve --config "$tmp/config.yaml" 2> "$log" &
    p=$!
    pids="$pids $p"
    url=""
    for _ in $(seq 1 100); do
      url=$(grep -o 'listening on http://[0-9.:]*' "$log" | head -1 | sed 's/listening on //' || true)
      [ -n "$url" ] && break
      kill -0 "$p" 2>/dev/null || { cat "$log"; exit 1; }
      sleep 0.1
    done
    [ -n "$url" ] || { echo "serve did not start"; cat "$log"; exit 1; }
    urls="${urls:+$urls,}$url"
  done
  echo "== thread history $mode, $n replica(s): $RUNS runs, $THREADS threads, store $STORE, model delay $DELAY, $(nproc) cores"
  set +e
  "$tmp/load" -url "$urls" -key-env AGENTMETER_BENCH_KEY -runs "$RUNS" -threads "$THREADS" -history="$history"
  r=$?
  set -e
  # Metrics are per replica: the runs each one executed (sum them for the whole).
  for u in ${urls//,/ }; do
    echo "-- $u"
    curl -s "$u/metrics" | grep -E '^agentmeter_gateway_runs_total' || true
  done
  if [ $r -ne 0 ]; then tail -20 "$tmp"/serve-*.log; rc=$r; fi
  stop_replicas
done
done
exit $rc
