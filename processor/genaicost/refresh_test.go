package genaicost

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/metrictest"
	"github.com/agentmeter/agentmeter/pricing"
)

// dataset is a small genai-prices snapshot pricing gpt-9 (a model the embedded snapshot
// does not have) at input per million and 4× that for output.
func dataset(version, date string, input float64) string {
	return fmt.Sprintf(`{"dataset": "@pydantic/genai-prices", "version": %q, "date": %q, "providers": [
	  {"id": "openai", "provider_match": {"contains": "openai"}, "model_match": {"starts_with": "gpt-"}, "models": [
	    {"id": "gpt-9", "match": {"or": [{"equals": "gpt-9"}, {"starts_with": "gpt-9-"}]}, "prices": {"input_mtok": %v, "output_mtok": %v}}]}]}`,
		version, date, input, input*4)
}

// priceServer serves a response the test sets, counting requests and recording the
// conditional headers of the last one.
type priceServer struct {
	*httptest.Server
	mu          sync.Mutex
	handler     http.HandlerFunc
	requests    atomic.Int64
	ifNoneMatch string
}

func newPriceServer(t *testing.T) *priceServer {
	ps := &priceServer{}
	ps.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ps.requests.Add(1)
		ps.mu.Lock()
		ps.ifNoneMatch = r.Header.Get("If-None-Match")
		h := ps.handler
		ps.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(ps.Close)
	return ps
}

func (ps *priceServer) serve(h http.HandlerFunc) {
	ps.mu.Lock()
	ps.handler = h
	ps.mu.Unlock()
}

// body answers 200 with data and an ETag, or 304 when the client already has that ETag.
func body(data, etag string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if etag != "" && r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if etag != "" {
			w.Header().Set("ETag", etag)
		}
		_, _ = w.Write([]byte(data))
	}
}

type refreshProc struct {
	c    *coster
	tel  *componenttest.Telemetry
	logs *observer.ObservedLogs
}

func newRefreshProc(t *testing.T, url string, interval time.Duration) *refreshProc {
	t.Helper()
	set, tel, logs := testSettings(t)
	cfg := createDefaultConfig()
	cfg.PriceRefresh = &PriceRefresh{URL: url, Interval: interval}
	require.NoError(t, cfg.Validate())
	c, err := newCoster(set, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.shutdown(context.Background())) })
	return &refreshProc{c: c, tel: tel, logs: logs}
}

// priceGPT9 prices one fresh gpt-9 call (1M input, 1M output) and returns its cost.
func (rp *refreshProc) priceGPT9(t *testing.T) (float64, bool) {
	t.Helper()
	td := ptrace.NewTraces()
	s := chatSpan(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty(), "chat gpt-9", func(m pcommon.Map) {
		m.PutStr(genai.AttrProviderName, "openai")
		m.PutStr(genai.AttrRequestModel, "gpt-9-2026-11-01")
		genai.PutUsage(m, genai.Usage{Input: 1_000_000, Output: 1_000_000})
	})
	rp.c.processTraces(context.Background(), td)
	c, _, ok := genai.CostFromMap(s.Attributes())
	return c.Total, ok
}

func (rp *refreshProc) refresh(t *testing.T) pricing.RefreshResult {
	t.Helper()
	return rp.c.refresher.Refresh(context.Background())
}

func (rp *refreshProc) failures(t *testing.T) []observer.LoggedEntry {
	t.Helper()
	return rp.logs.FilterMessageSnippet("price refresh failed").All()
}

// Every failure keeps the last good table and says why in one log line; a good file
// replaces it; an unchanged file is a 304.
func TestPriceRefreshKeepsTheLastGoodTable(t *testing.T) {
	ps := newPriceServer(t)
	rp := newRefreshProc(t, ps.URL+"/data.json?token=s3cret", time.Hour)

	_, ok := rp.priceGPT9(t)
	require.False(t, ok, "the embedded snapshot does not price gpt-9")
	assert.Equal(t, pricing.DefaultDataset().Version, rp.c.active().Version)

	ps.serve(body(dataset("9.9.9", "2026-11-25", 1), `"v9"`))
	require.Equal(t, pricing.RefreshUpdated, rp.refresh(t).Outcome)
	cost, ok := rp.priceGPT9(t)
	require.True(t, ok)
	assert.InDelta(t, 5.0, cost, 1e-12, "$1 + $4 per million")
	assert.Equal(t, "9.9.9", rp.c.active().Version)
	// the snapshot's own models and the overrides are still priced
	_, ok = rp.c.active().Table.Lookup("anthropic", "claude-sonnet-4-0", time.Now())
	assert.True(t, ok)

	require.Equal(t, pricing.RefreshNotModified, rp.refresh(t).Outcome)
	assert.Equal(t, `"v9"`, ps.ifNoneMatch, "a conditional request")

	cases := []struct {
		name    string
		handler http.HandlerFunc
		why     string
	}{
		{"server error", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) }, "status 500 Internal Server Error"},
		{"truncated body", func(w http.ResponseWriter, _ *http.Request) {
			d := dataset("10.0.0", "2026-11-26", 2)
			w.Header().Set("Content-Length", strconv.Itoa(len(d)))
			_, _ = w.Write([]byte(d[:len(d)/2]))
		}, "reading the body: unexpected EOF"},
		{"truncated JSON", body(dataset("10.0.0", "2026-11-26", 2)[:120], ""), "genai-prices data: unexpected end of JSON input"},
		{"malformed price", body(dataset("10.0.0", "2026-11-26", -2), ""), "openai/gpt-9 (models[0]): prices[0].input_mtok must be a finite non-negative number, got -2"},
		{"no providers", body(`[]`, ""), "genai-prices data: no providers"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps.serve(tc.handler)
			res := rp.refresh(t)
			require.Equal(t, pricing.RefreshFailed, res.Outcome)
			cost, ok := rp.priceGPT9(t)
			require.True(t, ok)
			assert.InDelta(t, 5.0, cost, 1e-12, "the last good table stays")
			assert.Equal(t, "9.9.9", rp.c.active().Version)
			logs := rp.failures(t)
			require.Len(t, logs, i+1, "one log line per failure")
			msg := logs[i].ContextMap()["error"].(string)
			assert.Contains(t, msg, tc.why)
			assert.NotContains(t, msg, "s3cret", "the URL's query is not logged")
		})
	}

	ps.serve(body(dataset("10.0.0", "2026-11-26", 2), `"v10"`))
	require.Equal(t, pricing.RefreshUpdated, rp.refresh(t).Outcome)
	cost, _ = rp.priceGPT9(t)
	assert.InDelta(t, 10.0, cost, 1e-12)

	refreshes, err := rp.tel.GetMetric("otelcol_processor_genaicost_price_refreshes")
	require.NoError(t, err)
	assert.Equal(t, int64(2), metrictest.SumInt64Where(t, refreshes, "outcome", "updated"))
	assert.Equal(t, int64(1), metrictest.SumInt64Where(t, refreshes, "outcome", "not_modified"))
	assert.Equal(t, int64(len(cases)), metrictest.SumInt64Where(t, refreshes, "outcome", "failed"))
}

// A refresh never changes a cost already written on a span.
func TestPriceRefreshNeverRewritesACost(t *testing.T) {
	ps := newPriceServer(t)
	rp := newRefreshProc(t, ps.URL, time.Hour)
	ps.serve(body(dataset("9.9.9", "2026-11-25", 1), ""))
	require.Equal(t, pricing.RefreshUpdated, rp.refresh(t).Outcome)

	td := ptrace.NewTraces()
	s := chatSpan(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty(), "chat gpt-9", func(m pcommon.Map) {
		m.PutStr(genai.AttrRequestModel, "gpt-9")
		genai.PutUsage(m, genai.Usage{Input: 1_000_000, Output: 1_000_000})
	})
	rp.c.processTraces(context.Background(), td)
	before := pcommon.NewMap()
	s.Attributes().CopyTo(before)

	ps.serve(body(dataset("10.0.0", "2026-11-26", 3), ""))
	require.Equal(t, pricing.RefreshUpdated, rp.refresh(t).Outcome)
	rp.c.processTraces(context.Background(), td) // a retried batch, or a second tier
	assert.Equal(t, before.AsRaw(), s.Attributes().AsRaw())
}

// Started, the processor fetches at once and then once per interval, without waiting for
// the fetch; the dataset's version and age are reported.
func TestPriceRefreshPicksUpWithinOneInterval(t *testing.T) {
	ps := newPriceServer(t)
	ps.serve(body(dataset("9.9.9", "2026-11-25", 1), ""))
	rp := newRefreshProc(t, ps.URL, time.Second)
	rp.c.start()
	require.Eventually(t, func() bool { _, ok := rp.priceGPT9(t); return ok }, 5*time.Second, 10*time.Millisecond)

	ps.serve(body(dataset("10.0.0", "2026-11-26", 2), ""))
	start := time.Now()
	require.Eventually(t, func() bool { c, _ := rp.priceGPT9(t); return c > 9 }, 5*time.Second, 10*time.Millisecond)
	assert.Less(t, time.Since(start), 2*time.Second, "picked up within one interval (with scheduling slack)")

	age, err := rp.tel.GetMetric("otelcol_processor_genaicost_price_dataset_age")
	require.NoError(t, err)
	g, ok := age.Data.(metricdata.Gauge[float64])
	require.True(t, ok)
	require.Len(t, g.DataPoints, 1)
	v, _ := g.DataPoints[0].Attributes.Value("version")
	assert.Equal(t, "10.0.0", v.AsString())
	want := time.Since(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)).Seconds()
	assert.InDelta(t, want, g.DataPoints[0].Value, 60)
}

// A slow server never holds up a batch.
func TestPriceRefreshNeverBlocksThePipeline(t *testing.T) {
	release := make(chan struct{})
	ps := newPriceServer(t)
	ps.serve(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	rp := newRefreshProc(t, ps.URL, time.Hour)
	rp.c.start()
	require.Eventually(t, func() bool { return ps.requests.Load() == 1 }, 5*time.Second, 10*time.Millisecond)
	done := make(chan struct{})
	go func() {
		_, _ = rp.priceGPT9(t)
		td := ptrace.NewTraces()
		chatSpan(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty(), "chat", func(m pcommon.Map) {
			m.PutStr(genai.AttrRequestModel, "gpt-4.1")
			genai.PutUsage(m, genai.Usage{Input: 10, Output: 1})
		})
		rp.c.processTraces(context.Background(), td)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a batch waited for the price refresh")
	}
	close(release)
}

func TestPriceRefreshValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want []string
	}{
		{Config{DefaultPrices: true, PriceRefresh: &PriceRefresh{}}, []string{`price_refresh.url must be an http or https URL, got ""`}},
		{Config{DefaultPrices: true, PriceRefresh: &PriceRefresh{URL: "ftp://x/data.json", Interval: time.Millisecond, Timeout: -1}}, []string{
			`price_refresh.url must be an http or https URL, got "ftp://x/data.json"`,
			"price_refresh.interval must be at least 1s, got 1ms",
			"price_refresh.timeout must not be negative",
		}},
		{Config{Prices: []pricing.Row{{Provider: "p", Model: "m", Rates: pricing.Rates{Input: pricing.F(1), Output: pricing.F(1)}}},
			PriceRefresh: &PriceRefresh{URL: "https://example.com/data.json"}}, []string{"price_refresh refreshes the default table: it needs default_prices: true"}},
	} {
		err := tc.cfg.Validate()
		require.Error(t, err)
		for _, w := range tc.want {
			assert.Contains(t, err.Error(), w)
		}
	}
}
