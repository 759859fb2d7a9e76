# PostgreSQL for the run store's shared suite (runtime/store/postgres) and the gateway
# tests: Debian's package, one cluster on loopback, started without systemd (the CI
# machine has none) with pg_ctlcluster as user postgres. Exports
# AGENTMETER_TEST_POSTGRES_DSN; the tests create one database per test on it. With CI=true
# a missing PostgreSQL fails the tests instead of skipping them (no DSN and no binaries).
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql
fi
AGENTMETER_PG_PORT=${AGENTMETER_PG_PORT:-5433}
pg_version=$(ls /usr/lib/postgresql | sort -n | tail -1)
# A cluster of our own (not Debian's "main"), so a developer's database is never touched.
if ! pg_lsclusters -h | awk '{print $1"/"$2}' | grep -qx "$pg_version/agentmeter"; then
  pg_createcluster "$pg_version" agentmeter -p "$AGENTMETER_PG_PORT" -- --auth-local=peer --auth-host=scram-sha-256 >/dev/null
fi
if ! pg_lsclusters -h | awk '$1=="'"$pg_version"'" && $2=="agentmeter" {print $4}' | grep -q online; then
  pg_ctlcluster "$pg_version" agentmeter start -o "-c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
fi
AGENTMETER_PG_PORT=$(pg_lsclusters -h | awk '$1=="'"$pg_version"'" && $2=="agentmeter" {print $3}')
runuser -u postgres -- psql -q -p "$AGENTMETER_PG_PORT" -v ON_ERROR_STOP=1 <<'SQL'
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'agentmeter') THEN
    CREATE ROLE agentmeter LOGIN CREATEDB PASSWORD 'agentmeter-ci';
  END IF;
END $$;
SQL
# A database the role owns, for the gateway load test (bench/gateway.sh STORE=postgres);
# the test suites create and drop their own databases.
if ! runuser -u postgres -- psql -p "$AGENTMETER_PG_PORT" -tAc "SELECT 1 FROM pg_database WHERE datname = 'agentmeter'" | grep -q 1; then
  runuser -u postgres -- createdb -p "$AGENTMETER_PG_PORT" -O agentmeter agentmeter
fi
export AGENTMETER_POSTGRES_DSN="postgres://agentmeter:agentmeter-ci@127.0.0.1:${AGENTMETER_PG_PORT}/agentmeter?sslmode=disable"
export AGENTMETER_TEST_POSTGRES_DSN="postgres://agentmeter:agentmeter-ci@127.0.0.1:${AGENTMETER_PG_PORT}/postgres?sslmode=disable"
runuser -u postgres -- psql -p "$AGENTMETER_PG_PORT" -tAc 'SELECT version()' | head -1
