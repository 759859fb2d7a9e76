#!/usr/bin/env bash
# Installs the outside programs the test suite runs for real, so `make test` works on a
# fresh machine: Debian's prometheus (scrapes the collector and the gateway in e2e tests),
# PostgreSQL's server binaries (the store suite starts a throwaway cluster when no DSN is
# given), the vendor JS SDKs under test/sdk (the agentusage e2e tests), the agent
# frameworks and instrumentations under test/interop (the interop e2e tests) and the price
# dataset under test/genai-prices (the price table's cross-check). Each step is
# skipped when already there; apt-get update runs at most once.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v prometheus >/dev/null || need+=(prometheus)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
{ command -v node >/dev/null && command -v npm >/dev/null; } || need+=(nodejs npm)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "test-deps: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
    exit 1
  fi
  echo "test-deps: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
for dir in test/sdk test/interop test/genai-prices; do
  if [ ! -d "$dir/node_modules" ]; then
    (cd "$dir" && npm ci --no-audit --no-fund --silent)
  fi
done
