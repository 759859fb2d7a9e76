// Package sqlstore is the RunStore over database/sql shared by the SQLite and PostgreSQL
// backends. A Dialect supplies what differs: placeholders, the migration files, the
// migration and thread locks, row-lock skipping, the queue sequence and how a unique
// violation looks. Queries are written once with "?"
// placeholders and rebound per dialect.
package sqlstore
