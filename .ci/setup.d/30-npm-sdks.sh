# Vendor SDKs (LangSmith, Langfuse) for the agentusage receiver's end-to-end tests
# (internal/e2e/agentusage_test.go runs the node scripts in test/sdk against the
# collector), and the agent frameworks and instrumentations of the interop tests
# (internal/e2e/interop_test.go runs test/interop against a fake model and the collector).
# Node and npm are on the machine image; install them if missing.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  apt-get install -y -qq --no-install-recommends nodejs npm
fi
node --version
(cd test/sdk && npm ci --no-audit --no-fund)
(cd test/interop && npm ci --no-audit --no-fund)
