package config

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/pricing"
)

// The journal's pricer follows pricing.price_refresh like the collector: a newer dataset
// served over loopback prices a model the snapshot does not know, and a configured model's
// pricing block still wins.
func TestJournalPricerRefreshes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"dataset": "@pydantic/genai-prices", "version": "9.9.9", "date": "2026-11-25", "providers": [
		  {"id": "openai", "models": [{"id": "gpt-9", "match": {"equals": "gpt-9"}, "prices": {"input_mtok": 1, "output_mtok": 4}}]}]}`))
	}))
	defer srv.Close()
	cfg, err := Parse([]byte("models:\n  - {name: main, provider: scripted, model: demo-model, pricing: {input: 2, output: 8}}\n" +
		"pricing:\n  price_refresh: {url: " + srv.URL + ", interval: 1h}\n"))
	require.NoError(t, err)
	var results []pricing.RefreshResult
	done := make(chan struct{}, 1)
	p, stop, err := cfg.Pricer(func(r pricing.RefreshResult) { results = append(results, r); done <- struct{}{} })
	require.NoError(t, err)
	defer stop()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no refresh")
	}
	require.Equal(t, pricing.RefreshUpdated, results[0].Outcome, "%v", results[0].Err)
	c, ok := p.Price("openai", "gpt-9", genai.Usage{Input: 1_000_000, Output: 1_000_000}, 0, time.Now())
	require.True(t, ok)
	assert.InDelta(t, 5.0, c.Total, 1e-12)
	c, ok = p.Price("scripted", "demo-model", genai.Usage{Input: 1_000_000, Output: 1_000_000}, 0, time.Now())
	require.True(t, ok)
	assert.InDelta(t, 10.0, c.Total, 1e-12)
}

func TestPricingSectionValidate(t *testing.T) {
	_, err := Parse([]byte("models:\n  - {name: main, provider: scripted, model: m}\npricing:\n  price_refresh: {url: 'ftp://x?token=s3cret', interval: 1ms, timeout: -1s}\n"))
	require.Error(t, err)
	for _, want := range []string{
		`pricing.price_refresh.url must be an http or https URL, got "ftp://x"`,
		"pricing.price_refresh.interval must be at least 1s, got 1ms",
		"pricing.price_refresh.timeout must not be negative",
	} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NotContains(t, err.Error(), "s3cret")
}
