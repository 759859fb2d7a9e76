package sqlstore

import (
	"io/fs"
	"strconv"
	"strings"
)

// Dialect is what differs between backends.
type Dialect struct {
	// Name is the driver's name in messages ("sqlite", "postgres").
	Name string
	// Numbered placeholders ($1, $2, ...) instead of "?".
	Numbered bool
	// Migrations holds NNNN_name.sql files applied in version order.
	Migrations fs.FS
	// MigrationLock, when set, runs first in the migration transaction so concurrent
	// starts of several gateways on one database apply each migration once.
	MigrationLock string
	// ThreadLock, when set, is a statement with one parameter (a thread id) that locks
	// the thread until the end of the transaction, so admitting and claiming a thread's
	// runs is serialised across processes. Unset, the backend has one writer anyway.
	ThreadLock string
	// SkipLocked is the row-lock clause of the claim's candidate query ("" when the
	// backend has no row locks).
	SkipLocked string
	// NextSeq is the expression giving a new run its queue_seq.
	NextSeq string
	// IsUniqueViolation recognises a primary-key conflict.
	IsUniqueViolation func(error) bool
}

// rebind turns "?" placeholders into "$n" for numbered dialects. Our queries never
// contain "?" inside string literals.
func (d Dialect) rebind(q string) string {
	if !d.Numbered {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
