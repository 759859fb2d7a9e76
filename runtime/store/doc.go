// Package store is the gateway's run store: threads, runs and the per-run token fields
// DeerFlow persists (docs/gateway.md#runs-and-the-store), with the token-usage
// aggregation (docs/gateway.md#api), and the line of runs per thread (RunQueue) that
// makes gateway processes sharing one database behave as one.
//
// RunStore is implemented by store/sqlite (embedded, pure Go, the default) and
// store/postgres (pgx). Both share one SQL implementation (store/sqlstore) and one test
// suite (store/storetest); the aggregation is reduced in Go by Aggregate, never in SQL,
// so both backends return byte-identical JSON for the same rows (DeerFlow's memory and
// SQL stores must agree the same way).
package store
