// Package sqlite is the embedded RunStore backend (the default): a single database file
// driven by modernc.org/sqlite, pure Go, no cgo.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	sqlite3 "modernc.org/sqlite"
	sqlite3lib "modernc.org/sqlite/lib"

	"github.com/agentmeter/agentmeter/runtime/store/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Dialect is SQLite's sqlstore dialect.
func Dialect() sqlstore.Dialect {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the embedded folder always exists
	}
	return sqlstore.Dialect{
		Name:       "sqlite",
		Migrations: sub,
		// One connection: every transaction holds the whole database.
		NextSeq: "(SELECT COALESCE(MAX(queue_seq), 0) + 1 FROM runs)",
		IsUniqueViolation: func(err error) bool {
			var se *sqlite3.Error
			if errors.As(err, &se) {
				c := se.Code()
				return c == sqlite3lib.SQLITE_CONSTRAINT_PRIMARYKEY || c == sqlite3lib.SQLITE_CONSTRAINT_UNIQUE
			}
			return false
		},
	}
}

// Open opens (creating when needed) the database file at path — ":memory:" for a
// private in-memory database — and applies the pending migrations. The parent folder is
// created. One connection serialises writers: SQLite allows one writer at a time, and
// queuing in database/sql is cheaper than SQLITE_BUSY retries; WAL keeps the file
// consistent if the process dies mid-write.
func Open(ctx context.Context, path string) (*sqlstore.Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: store.dsn (the database file) is required")
	}
	dsn := path
	unlock := func() error { return nil }
	if path != ":memory:" {
		p := strings.TrimPrefix(path, "file:")
		if i := strings.IndexByte(p, '?'); i >= 0 {
			p = p[:i]
		}
		if dir := filepath.Dir(p); dir != "" {
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return nil, fmt.Errorf("sqlite: create data folder: %w", err)
			}
		}
		var err error
		if unlock, err = lockFile(p); err != nil {
			return nil, err
		}
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	if path != ":memory:" {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	db, err := sql.Open("sqlite", dsn+sep+q.Encode())
	if err != nil {
		_ = unlock()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		_ = unlock()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	d := Dialect()
	if _, err := sqlstore.Migrate(ctx, db, d); err != nil {
		db.Close()
		_ = unlock()
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	s := sqlstore.New(db, d)
	s.OnClose(unlock)
	return s, nil
}
