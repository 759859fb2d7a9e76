//go:build !unix

package sqlite

// lockFile is a no-op where flock is unavailable: SQLite's own locking still keeps the
// file consistent, but a second process is not detected at start.
func lockFile(string) (func() error, error) { return func() error { return nil }, nil }
