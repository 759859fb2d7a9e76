package faulty

import (
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const exposition = `# HELP otelcol_exporter_queue_size Current size of the retry queue
# TYPE otelcol_exporter_queue_size gauge
otelcol_exporter_queue_size{data_type="traces",exporter="langfuse"} 7
otelcol_exporter_queue_size{data_type="traces",exporter="langsmith"} 3
otelcol_exporter_send_failed_spans_total{exporter="langsmith"} 1800
otelcol_process_runtime_heap_alloc_bytes 1.048576e+06
broken line
otelcol_x{a="b"} notanumber
`

func TestParseAndSum(t *testing.T) {
	m := ParseMetrics(exposition)
	sum := func(name string, labels ...string) []any {
		v, found := m.Sum(name, labels...)
		return []any{v, found}
	}
	assert.Equal(t, []any{10.0, true}, sum("otelcol_exporter_queue_size"))
	assert.Equal(t, []any{7.0, true}, sum("otelcol_exporter_queue_size", `exporter="langfuse"`))
	assert.Equal(t, []any{0.0, false}, sum("otelcol_exporter_queue_size", `exporter="other"`), "no such series")
	assert.Equal(t, []any{1800.0, true}, sum("otelcol_exporter_send_failed_spans_total"))
	assert.Equal(t, []any{0.0, false}, sum("otelcol_exporter_send_failed_spans"), "names match whole")
	assert.Equal(t, []any{float64(1 << 20), true}, sum("otelcol_process_runtime_heap_alloc_bytes"))
	assert.Len(t, m.Samples, 4, "comments and malformed lines skipped")
}

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(exposition))
	}))
	defer srv.Close()
	m, err := Scrape(srv.URL + "/metrics")
	require.NoError(t, err)
	q, found := m.Sum("otelcol_exporter_queue_size")
	assert.True(t, found)
	assert.Equal(t, 10.0, q)
	_, err = Scrape(srv.URL + "/nope")
	assert.ErrorContains(t, err, "404")
}

func TestRSS(t *testing.T) {
	rss, err := RSS(os.Getpid())
	require.NoError(t, err)
	assert.Greater(t, rss, int64(1<<20))
	_, err = RSS(-1)
	assert.Error(t, err)
}
