package sqlite_test

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/agentmeter/agentmeter/runtime/state"
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
	migs, err := sqlstore.LoadMigrations(sqlite.Dialect().Migrations)
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != len(migs) || len(migs) < 4 {
		t.Fatalf("schema_migrations = %v, want versions 1..%d", versions, len(migs))
	}
	for i, v := range versions {
		if v != migs[i].Version || v != i+1 {
			t.Fatalf("schema_migrations = %v, want versions 1..%d", versions, len(migs))
		}
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

func openBench(b *testing.B) store.RunStore {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkStore(b *testing.B) { storetest.Bench(b, openBench) }

// migratedTo opens path with only the first n migrations applied (a database an earlier
// binary wrote).
func migratedTo(t *testing.T, path string, n int) (*sql.DB, sqlstore.Dialect) {
	t.Helper()
	old := sqlite.Dialect()
	all, err := sqlstore.LoadMigrations(old.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	mfs := fstest.MapFS{}
	entries, err := fs.ReadDir(old.Migrations, ".")
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries[:n] {
		b, err := fs.ReadFile(old.Migrations, e.Name())
		if err != nil || all[i].Version != i+1 {
			t.Fatalf("migration %s: %v", e.Name(), err)
		}
		mfs[e.Name()] = &fstest.MapFile{Data: b}
	}
	old.Migrations = mfs
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqlstore.Migrate(context.Background(), db, old); err != nil {
		t.Fatal(err)
	}
	return db, old
}

// upgradedFrom writes a database with the first n migrations applied, lets seed add rows
// as that earlier binary would, and opens it with this one (closed when the test ends).
func upgradedFrom(t *testing.T, n int, seed func(db *sql.DB, old sqlstore.Dialect)) *sqlstore.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	db, old := migratedTo(t, path, n)
	seed(db, old)
	db.Close()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestUpgradeFromVersion3 opens a database written before thread state existed: the
// migration adds the tables and the old rows are untouched.
func TestUpgradeFromVersion3(t *testing.T) {
	ctx := context.Background()
	s := upgradedFrom(t, 3, func(db *sql.DB, old sqlstore.Dialect) {
		if err := sqlstore.New(db, old).CreateThread(ctx, store.Thread{ID: "t", UserID: "alice"}); err != nil {
			t.Fatal(err)
		}
	})
	th, err := s.GetThread(ctx, "t")
	if err != nil || th.UserID != "alice" {
		t.Fatalf("thread after the upgrade = %+v, %v", th, err)
	}
	if _, err := s.SaveThreadState(ctx, "t", state.State{Title: "T"}, 0); err != nil {
		t.Fatal(err)
	}
	if th, _ := s.GetThread(ctx, "t"); th.Title != "T" {
		t.Fatalf("title after the upgrade = %q", th.Title)
	}
}

// TestUpgradeEndsRunsLeftWithoutLeases: runs an earlier binary left pending or running
// end as error at the first renewal after the upgrade, and their threads take runs.
func TestUpgradeEndsRunsLeftWithoutLeases(t *testing.T) {
	ctx := context.Background()
	s := upgradedFrom(t, 5, func(db *sql.DB, _ sqlstore.Dialect) {
		for _, r := range [][3]string{{"left-running", "t", "running"}, {"left-pending", "u", "pending"}} {
			if _, err := db.ExecContext(ctx, `INSERT INTO runs (run_id, thread_id, status, created_at, updated_at) VALUES (?, ?, ?, 1, 1)`,
				r[0], r[1], r[2]); err != nil {
				t.Fatal(err)
			}
		}
	})
	ids, err := s.ExpireLeases(ctx, time.Now(), "lease expired")
	if err != nil || len(ids) != 2 {
		t.Fatalf("expired %v, %v; want both runs left behind", ids, err)
	}
	for _, th := range []string{"t", "u"} {
		if err := s.AdmitRun(ctx, store.Run{RunID: "new-" + th, ThreadID: th, Input: "{}"}, false, "", time.Time{}); err != nil {
			t.Fatalf("thread %s after the upgrade: %v", th, err)
		}
	}
}

// TestSecondProcessRefused: a second open of one database file (as a second gateway
// process would) is refused with a message saying why and what to use instead; once the
// first closes, the file opens again.
func TestSecondProcessRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "one.db")
	first, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.Open(ctx, path)
	if err == nil {
		t.Fatal("a second open of the same file succeeded")
	}
	for _, want := range []string{"already open in another process (pid ", "store.driver: postgres"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	again.Close()
}
