# PostgreSQL for the run store's shared suite (runtime/store/postgres), the gateway load
# test and anything else that wants a real database: Debian's package, our own cluster
# "agentmeter" on 127.0.0.1 (never Debian's "main"), started without systemd (the CI
# machine has none) with pg_ctlcluster, which runs the server as user postgres.
# Exports AGENTMETER_TEST_POSTGRES_DSN (a role that may create databases: each test
# creates and drops its own) and AGENTMETER_POSTGRES_DSN (a database the role owns, for
# bench/gateway.sh STORE=postgres). Sourced by .ci/run under `set -euo pipefail`: no
# pipelines whose reader exits early.
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql
fi
pg_version=$(ls /usr/lib/postgresql | sort -n | tail -1)
pg_clusters=$(pg_lsclusters -h)
pg_line=$(awk -v v="$pg_version" '$1 == v && $2 == "agentmeter"' <<<"$pg_clusters")
if [ -z "$pg_line" ]; then
  pg_createcluster "$pg_version" agentmeter -p "${AGENTMETER_PG_PORT:-5433}" -- --auth-local=peer --auth-host=scram-sha-256 >/dev/null
  pg_line=$(awk -v v="$pg_version" '$1 == v && $2 == "agentmeter"' <<<"$(pg_lsclusters -h)")
fi
AGENTMETER_PG_PORT=$(awk '{print $3}' <<<"$pg_line")
if [ "$(awk '{print $4}' <<<"$pg_line")" != "online" ]; then
  pg_ctlcluster "$pg_version" agentmeter start -o "-c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
fi
runuser -u postgres -- psql -q -p "$AGENTMETER_PG_PORT" -v ON_ERROR_STOP=1 <<'SQL'
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'agentmeter') THEN
    CREATE ROLE agentmeter LOGIN CREATEDB PASSWORD 'agentmeter-ci';
  END IF;
END $$;
SQL
pg_has_db=$(runuser -u postgres -- psql -p "$AGENTMETER_PG_PORT" -tAc "SELECT count(*) FROM pg_database WHERE datname = 'agentmeter'")
if [ "$pg_has_db" = "0" ]; then
  runuser -u postgres -- createdb -p "$AGENTMETER_PG_PORT" -O agentmeter agentmeter
fi
export AGENTMETER_POSTGRES_DSN="postgres://agentmeter:agentmeter-ci@127.0.0.1:${AGENTMETER_PG_PORT}/agentmeter?sslmode=disable"
export AGENTMETER_TEST_POSTGRES_DSN="postgres://agentmeter:agentmeter-ci@127.0.0.1:${AGENTMETER_PG_PORT}/postgres?sslmode=disable"
runuser -u postgres -- psql -p "$AGENTMETER_PG_PORT" -tAc 'SELECT version()'
