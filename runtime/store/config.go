package store

import (
	"errors"
	"fmt"
)

// Drivers a Config may select.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// DefaultSQLitePath is the default database file, under the data folder.
const DefaultSQLitePath = "data/agentmeter.db"

// Config is the `store:` section of config.yaml.
type Config struct {
	// Driver is sqlite (default) or postgres.
	Driver string `yaml:"driver"`
	// DSN is the SQLite database file (default data/agentmeter.db; ":memory:" for a
	// private in-memory database) or a PostgreSQL libpq URL / key=value string. For
	// postgres, DSNEnv may name an environment variable holding it instead, so a
	// password never sits in the file.
	DSN    string `yaml:"dsn"`
	DSNEnv string `yaml:"dsn_env"`
}

// NewConfig returns the section with its defaults (config.RegisterSection's newValue).
func NewConfig() *Config { return &Config{Driver: DriverSQLite} }

// Validate collects every problem; messages name the key under store.
func (c *Config) Validate() error {
	var errs []error
	switch c.Driver {
	case DriverSQLite, DriverPostgres:
	default:
		errs = append(errs, fmt.Errorf("driver %q must be sqlite or postgres", c.Driver))
	}
	if c.DSN != "" && c.DSNEnv != "" {
		errs = append(errs, errors.New("set dsn or dsn_env, not both"))
	}
	if c.Driver == DriverPostgres && c.DSN == "" && c.DSNEnv == "" {
		errs = append(errs, errors.New("dsn (or dsn_env) is required for driver postgres"))
	}
	return errors.Join(errs...)
}
