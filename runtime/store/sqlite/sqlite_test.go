package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentmeter/agentmeter/runtime/store"
	"github.com/agentmeter/agentmeter/runtime/store/sqlite"
	"github.com/agentmeter/agentmeter/runtime/store/sqlstore"
	"github.com/agentmeter/agentmeter/runtime/store/storetest"
)

func TestSharedSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.RunStore {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "data", "agentmeter.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestSharedSuiteInMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.RunStore {
		s, err := sqlite.Open(context.Background(), ":memory:")
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestMigrationsAppliedOnceAndVersioned(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRun(ctx, store.Run{RunID: "r", ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.GetRun(ctx, "r"); err != nil {
		t.Fatalf("data lost across reopen: %v", err)
	}
	applied, err := sqlstore.Migrate(ctx, s.DB(), sqlite.Dialect())
	if err != nil || len(applied) != 0 {
		t.Fatalf("second Migrate applied %v, %v; want nothing", applied, err)
	}
	var versions []int
	rows, err := s.DB().Query(`SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		_ = rows.Scan(&v)
		versions = append(versions, v)
	}
	if len(versions) != 3 || versions[0] != 1 || versions[2] != 3 {
		t.Fatalf("schema_migrations = %v, want [1 2 3]", versions)
	}
	// A database from a newer binary is refused, not silently used.
	if _, err := s.DB().Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlstore.Migrate(ctx, s.DB(), sqlite.Dialect()); err == nil {
		t.Fatal("Migrate accepted a schema newer than the binary")
	}
}

func TestOpenRequiresPath(t *testing.T) {
	if _, err := sqlite.Open(context.Background(), ""); err == nil {
		t.Fatal("empty path accepted")
	}
}

func openBench(b *testing.B) *sqlstore.Store {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkRunLifecycle(b *testing.B) { storetest.BenchRunLifecycle(b, openBench(b)) }

func BenchmarkAggregate100Runs(b *testing.B) { storetest.BenchAggregate(b, openBench(b), 100) }
