# Vendor SDKs (LangSmith, Langfuse) for the agentusage receiver's end-to-end tests:
# internal/e2e/agentusage_test.go runs the node scripts in test/sdk against the
# collector. Node and npm are on the machine image; install them if missing.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  apt-get install -y -qq --no-install-recommends nodejs npm
fi
node --version
(cd test/sdk && npm ci --no-audit --no-fund)
