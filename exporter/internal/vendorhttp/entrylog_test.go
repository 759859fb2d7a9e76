package vendorhttp

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/agentmeter/agentmeter/internal/filestoragetest"
)

func entry(k, v string) Entry { return Entry{[]byte(k), []byte(v)} }

// readAll opens a log on c and returns the entries it reads back, in order.
func readAll(t *testing.T, c storage.Client) (*EntryLog, []string) {
	t.Helper()
	var got []string
	l, err := OpenEntryLog(context.Background(), c, func(e Entry) { got = append(got, string(e.Key)+"="+string(e.Value)) })
	require.NoError(t, err)
	return l, got
}

// Records read back in the order they were written, whatever the store's order (past
// 255 records the first byte of the key changes); a rewrite replaces them all in one
// transaction; a damaged record or a key that is no record is deleted at start.
func TestEntryLog(t *testing.T) {
	open := filestoragetest.ExporterClient(t, t.TempDir(), component.MustNewID("langfuse"), "log")
	ctx := context.Background()
	c := open()
	l, got := readAll(t, c)
	assert.Empty(t, got)
	var want []string
	for i := range 300 {
		require.NoError(t, l.Append(ctx, []Entry{entry(fmt.Sprint("k", i%7), fmt.Sprint(i))}))
		want = append(want, fmt.Sprintf("k%d=%d", i%7, i))
	}
	require.NoError(t, l.Append(ctx, nil), "nothing to write")
	assert.True(t, l.Due(100), "300 entries: over twice 100")
	assert.True(t, l.Due(4000), "300 records: over a sixteenth of 4000")
	assert.False(t, l.Due(8000))
	_, got = readAll(t, c)
	assert.Equal(t, want, got)

	require.NoError(t, l.Rewrite(ctx, []Entry{entry("a", "1"), entry("b", "2")}))
	require.NoError(t, l.Append(ctx, []Entry{entry("a", "3")}))
	require.NoError(t, c.Set(ctx, "not a record", []byte{1}))
	require.NoError(t, c.Set(ctx, recordKey(1<<40), []byte{5, 'x'})) // cut short
	require.NoError(t, l.Close(ctx))

	c = open()
	l, got = readAll(t, c)
	assert.Equal(t, []string{"a=1", "b=2", "a=3"}, got)
	assert.Equal(t, 3, l.written)
	assert.Len(t, l.records, 2)
	assert.Less(t, l.next, uint64(1000), "a damaged record's number is not carried on")
	n := 0
	require.NoError(t, c.(storage.Walker).Walk(ctx, func(string, []byte) ([]*storage.Operation, error) { n++; return nil, nil }))
	assert.Equal(t, 2, n, "the rewrite's record and the one after it")
	require.NoError(t, l.Close(ctx))
}
