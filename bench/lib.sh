# Shared by the bench/*.sh scripts: source it after `cd` to the repository root.

# private_collector DIR copies the collector to measure into DIR/agentmeter-collector:
# $AGENTMETER_COLLECTOR when set, else a fresh `make collector`. The scripts run the copy,
# so a `make collector` elsewhere may replace bin/ while they run.
private_collector() {
  local collector=${AGENTMETER_COLLECTOR:-}
  if [ -z "$collector" ]; then
    make --no-print-directory collector >/dev/null
    collector=bin/agentmeter-collector
  fi
  cp "$collector" "$1/agentmeter-collector"
}

# free_port prints a loopback TCP port that was free a moment ago.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
