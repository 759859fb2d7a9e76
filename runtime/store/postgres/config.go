package postgres

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
)

// pgxConfig parses a DSN. pgx's parse errors quote the DSN, so only a fixed message is
// returned.
func pgxConfig(dsn string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("postgres: store.dsn is not a valid libpq URL or key=value string")
	}
	return cfg, nil
}

// redact removes the password from an error message.
func redact(err error, password string) error {
	if password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), password, "xxxxx"))
}
