// Package postgres is the RunStore backend for several gateway replicas: PostgreSQL
// through pgx (database/sql adapter), selected by a libpq URL or key=value DSN.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/agentmeter/agentmeter/runtime/store/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLockKey is the advisory lock taken while migrating ("agentmtr" as an int64),
// so gateways starting together apply each migration once.
const migrationLockKey = 0x6167656e746d7472

// Dialect is PostgreSQL's sqlstore dialect.
func Dialect() sqlstore.Dialect {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the embedded folder always exists
	}
	return sqlstore.Dialect{
		Name:          "postgres",
		Numbered:      true,
		Migrations:    sub,
		MigrationLock: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", int64(migrationLockKey)),
		// A thread's lock: the 32-bit hash of its id, which never equals the 64-bit
		// migration key.
		ThreadLock: "SELECT pg_advisory_xact_lock(hashtext(?))",
		SkipLocked: "FOR UPDATE OF r SKIP LOCKED",
		NextSeq:    "nextval('runs_queue_seq_seq')",
		IsUniqueViolation: func(err error) bool {
			var pe *pgconn.PgError
			return errors.As(err, &pe) && pe.Code == "23505"
		},
	}
}

// Open connects with dsn and applies the pending migrations. Errors never include the
// DSN: it may carry a password.
func Open(ctx context.Context, dsn string) (*sqlstore.Store, error) {
	if dsn == "" {
		return nil, errors.New("postgres: store.dsn is required")
	}
	cfg, err := pgxConfig(dsn)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(20)
	db.SetMaxIdleConns(10)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres: connect to %s:%d/%s: %w", cfg.Host, cfg.Port, cfg.Database, redact(err, cfg.Password))
	}
	d := Dialect()
	if _, err := sqlstore.Migrate(ctx, db, d); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return sqlstore.New(db, d), nil
}
