# Prometheus server for the token-metrics end-to-end tests (internal/e2e/sidecar_test.go).
# Debian's package does not start a server by itself on a container without systemd, and
# the tests do not want one: each test starts its own `prometheus` on a free loopback port
# with a generated scrape config (internal/e2e/prometheus_helpers.go).
if ! command -v prometheus >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus
fi
prometheus --version 2>&1 | head -1
