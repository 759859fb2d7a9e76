// Package runtree turns OTel spans into LangSmith runs: deterministic run ids, the
// dotted_order of each run's ancestor chain, run types, usage_metadata and metadata.
// Vendor rules: docs/langsmith.md#span--run. The ids' and timestamps' formats are
// internal/dottedorder's.
package runtree
