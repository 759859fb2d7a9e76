package vendorhttp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/confighttp"
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

// The exporters' default keeps DefaultMaxIdleConnsPerHost idle connections a host, as if
// a user had written it in `keepalive:`, and what a user writes wins, with the meaning it
// has for any confighttp client: the same config as that YAML on a stock default. Only
// the keepalive section is used, so this holds whether confighttp still has the flat
// fields or not.
func TestKeepIdleConnections(t *testing.T) {
	for _, tc := range []struct {
		name       string
		user, want map[string]any
	}{
		{"default", nil, map[string]any{"keepalive": map[string]any{"max_idle_conns_per_host": DefaultMaxIdleConnsPerHost}}},
		{"user value", map[string]any{"keepalive": map[string]any{"max_idle_conns_per_host": 4}}, nil},
		{"other keepalive keys keep the default", map[string]any{"keepalive": map[string]any{"max_idle_conns": 50}},
			map[string]any{"keepalive": map[string]any{"max_idle_conns": 50, "max_idle_conns_per_host": DefaultMaxIdleConnsPerHost}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = tc.user
			}
			got := confighttp.NewDefaultClientConfig()
			KeepIdleConnections(&got)
			require.NoError(t, confmap.NewFromStringMap(tc.user).Unmarshal(&got))
			stock := confighttp.NewDefaultClientConfig()
			require.NoError(t, confmap.NewFromStringMap(want).Unmarshal(&stock))
			assert.Equal(t, stock, got)
		})
	}
}
