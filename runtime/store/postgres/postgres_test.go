package postgres_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/agentmeter/agentmeter/runtime/store"
	"github.com/agentmeter/agentmeter/runtime/store/postgres"
	"github.com/agentmeter/agentmeter/runtime/store/sqlite"
	"github.com/agentmeter/agentmeter/runtime/store/sqlstore"
	"github.com/agentmeter/agentmeter/runtime/store/storetest"
)

var (
	server    *storetest.PostgresServer
	serverErr error
)

// TestMain starts one PostgreSQL for the package (or uses AGENTMETER_TEST_POSTGRES_DSN);
// each test gets its own database on it.
func TestMain(m *testing.M) {
	server, serverErr = storetest.StartPostgres()
	code := m.Run()
	if server != nil {
		server.Stop()
	}
	os.Exit(code)
}

func open(t *testing.T) *sqlstore.Store {
	t.Helper()
	srv := storetest.RequirePostgres(t, server, serverErr)
	s, err := postgres.Open(context.Background(), srv.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSharedSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.RunStore { return open(t) })
}

// bothBackends opens a fresh PostgreSQL database and an in-memory SQLite one, closed
// when the test ends.
func bothBackends(t *testing.T) (pg, lite store.RunStore) {
	t.Helper()
	p := open(t)
	t.Cleanup(func() { p.Close() })
	l, err := sqlite.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return p, l
}

// TestSQLiteAndPostgresAgree seeds the same rows into both backends and compares the
// token-usage JSON byte for byte (DeerFlow's test_memory_and_sql_stores_agree).
func TestSQLiteAndPostgresAgree(t *testing.T) {
	ctx := context.Background()
	pg, lite := bothBackends(t)
	for _, s := range []store.RunStore{pg, lite} {
		storetest.SeedPinnedExample(t, s, "pinned")
		storetest.SeedByModel(t, s, "by-model")
	}
	for _, thread := range []string{"pinned", "by-model", "pinned-other", "empty"} {
		for _, active := range []bool{false, true} {
			var bodies []string
			for _, s := range []store.RunStore{pg, lite} {
				u, err := s.AggregateTokensByThread(ctx, thread, active)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(u)
				bodies = append(bodies, string(b))
			}
			if bodies[0] != bodies[1] {
				t.Errorf("thread %s include_active=%v:\npostgres %s\nsqlite   %s", thread, active, bodies[0], bodies[1])
			}
		}
	}
}

// TestThreadStateSameOnBothBackends: a thread state saved on each backend reads back as
// the same JSON.
func TestThreadStateSameOnBothBackends(t *testing.T) {
	ctx := context.Background()
	pg, lite := bothBackends(t)
	var bodies []string
	for _, s := range []store.RunStore{pg, lite} {
		storetest.SeedThreadState(t, s, "t")
		st, _, err := s.LoadThreadState(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(st)
		bodies = append(bodies, string(b))
	}
	if bodies[0] != bodies[1] {
		t.Fatalf("postgres %s\nsqlite   %s", bodies[0], bodies[1])
	}
}

func TestMigrationsAppliedOnce(t *testing.T) {
	s := open(t)
	defer s.Close()
	applied, err := sqlstore.Migrate(context.Background(), s.DB(), postgres.Dialect())
	if err != nil || len(applied) != 0 {
		t.Fatalf("second Migrate applied %v, %v; want nothing", applied, err)
	}
	migs, err := sqlstore.LoadMigrations(postgres.Dialect().Migrations)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != len(migs) {
		t.Fatalf("schema_migrations rows = %d, %v; want %d", n, err, len(migs))
	}
}

func TestBadDSNDoesNotLeakPassword(t *testing.T) {
	_, err := postgres.Open(context.Background(), "postgres://u:s3cret-pw@127.0.0.1:1/db?sslmode=disable&connect_timeout=1")
	if err == nil {
		t.Fatal("connecting to port 1 succeeded")
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("error leaks the password: %v", err)
	}
	_, err = postgres.Open(context.Background(), "postgres://u:s3cret-pw@%zz")
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("bad DSN error = %v", err)
	}
}

func openBench(b *testing.B) store.RunStore {
	srv := storetest.RequirePostgres(b, server, serverErr)
	s, err := postgres.Open(context.Background(), srv.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkStore(b *testing.B) { storetest.Bench(b, openBench) }
