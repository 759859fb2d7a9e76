package vendorhttp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

// A `batch` section that names no sizes gets the exporters' span counts, in the queue's
// own keys; what it names wins, as for the stock exporters.
func TestBatchDefaultsAreSpanCounts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		yaml     map[string]any
		on       bool
		min, max int64
		flush    time.Duration
	}{
		{"no batch section", map[string]any{"storage": "file_storage"}, false, DefaultBatchMinSpans, DefaultBatchMaxSpans, 200 * time.Millisecond},
		{"flush_timeout only", map[string]any{"batch": map[string]any{"flush_timeout": "1s"}}, true, DefaultBatchMinSpans, DefaultBatchMaxSpans, time.Second},
		{"sizes named", map[string]any{"batch": map[string]any{"min_size": 100, "max_size": 0}}, true, 100, 0, 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := DefaultQueueConfig()
			require.NoError(t, confmap.NewFromStringMap(tc.yaml).Unmarshal(&q))
			require.NoError(t, q.Validate())
			assert.Equal(t, tc.on, q.Batch.HasValue())
			b := q.Batch.GetOrInsertDefault()
			require.NoError(t, b.Validate())
			assert.Equal(t, exporterhelper.RequestSizerTypeItems, b.Sizer)
			assert.Equal(t, tc.min, b.MinSize)
			assert.Equal(t, tc.max, b.MaxSize)
			assert.Equal(t, tc.flush, b.FlushTimeout)
			assert.Equal(t, exporterhelper.RequestSizerTypeBytes, q.Sizer, "the queue stays sized in bytes")
		})
	}
}
