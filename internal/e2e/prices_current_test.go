//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/calcprice"
)

// currentCall is one call to a model current in November 2026, as an app reports it to
// agentusage, with the provider id @pydantic/genai-prices files it under.
type currentCall struct {
	provider, gpProvider, model string
	usage                       genai.Usage
}

var currentCalls = []currentCall{
	{"openai", "openai", "gpt-5.5", genai.Usage{Input: 20_000, CacheRead: 8_000, Output: 1_500, Reasoning: 600}},
	{"openai", "openai", "gpt-5.4-mini", genai.Usage{Input: 6_000, Output: 400}},
	{"anthropic", "anthropic", "claude-opus-4-8", genai.Usage{Input: 30_000, CacheRead: 10_000, CacheCreation: 5_000, Output: 2_000}},
	{"anthropic", "anthropic", "claude-sonnet-4-6", genai.Usage{Input: 14_000, CacheRead: 9_000, Output: 800}},
	{"gcp.gemini", "google", "gemini-3.5-flash", genai.Usage{Input: 12_000, Output: 900, Reasoning: 300}},
	{"gcp.gemini", "google", "gemini-3.1-pro-preview", genai.Usage{Input: 250_000, CacheRead: 50_000, Output: 3_000}}, // above the 200k tier
	{"deepseek", "deepseek", "deepseek-chat", genai.Usage{Input: 10_000, CacheRead: 4_000, Output: 700}},
	{"mistral_ai", "mistral", "mistral-medium-latest", genai.Usage{Input: 8_000, Output: 600}},
}

// calcPrice prices call i at startOf(i) with @pydantic/genai-prices' own calcPrice under
// node (test/genai-prices). Without node or its package the test skips, unless CI is set.
func calcPrice(t *testing.T, calls []currentCall, startOf func(int) time.Time) []float64 {
	t.Helper()
	var cases []calcprice.Call
	for i, c := range calls {
		cases = append(cases, calcprice.Call{Provider: c.gpProvider, Model: c.model, Timestamp: startOf(i).Format(time.RFC3339Nano),
			Usage: calcprice.Usage{Input: c.usage.Input, CacheRead: c.usage.CacheRead, Write: c.usage.CacheCreation, Output: c.usage.Output, Reasoning: c.usage.Reasoning}})
	}
	totals := make([]float64, len(calls))
	for i, r := range calcprice.Price(t, cases) {
		require.NotNil(t, r, "calcPrice does not know %s", calls[i].model)
		require.Empty(t, r.Error, calls[i].model)
		totals[i] = r.Total
	}
	return totals
}

// Calls to current models of OpenAI, Anthropic, Google, DeepSeek and Mistral, dated now,
// through the shipped otelcol-config.yaml: each call's cost on its span is what the
// dataset's own calculator says, and Prometheus, Langfuse and LangSmith agree with the
// spans' sum.
func TestCurrentModelsPricedAsTheDataset(t *testing.T) {
	ports := setSidecarEnv(t)
	lf, ls := costVendors(t)
	tracesFile := startShippedWithFile(t, ports)
	prom := scrapeShipped(t, ports.Prometheus)

	at := time.Now().UTC().Truncate(time.Second)
	startOf := func(i int) time.Time { return at.Add(time.Duration(i) * time.Second) }
	want := calcPrice(t, currentCalls, startOf)
	var recs []string
	for i, c := range currentCalls {
		start := startOf(i)
		recs = append(recs, fmt.Sprintf(`{"thread_id":"t-current","run_id":"run-current","source_run_id":"call-%d","caller":"lead_agent","model_name":%q,"provider":%q,
  "input_tokens":%d,"output_tokens":%d,"cache_read_tokens":%d,"cache_creation_tokens":%d,"reasoning_tokens":%d,"start_time":%q,"end_time":%q}`,
			i, c.model, c.provider, c.usage.Input, c.usage.Output, c.usage.CacheRead, c.usage.CacheCreation, c.usage.Reasoning,
			start.Format(time.RFC3339), start.Add(500*time.Millisecond).Format(time.RFC3339Nano)))
	}
	body := `{"records":[` + strings.Join(recs, ",\n") + `]}`
	resp, err := http.Post("http://"+ports.AgentUsage+"/v1/usage", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// spans: every call priced at the dataset's price
	got := map[string]float64{}
	var traceID string
	require.Eventually(t, func() bool {
		tds, _ := ReadTraces(tracesFile)
		for _, sp := range Spans(tds) {
			if v, ok := sp.Attributes().Get(genai.AttrConversationID); !ok || v.Str() != "t-current" {
				continue
			}
			traceID = sp.TraceID().String()
			model, _ := sp.Attributes().Get(genai.AttrRequestModel)
			if c, _, ok := genai.CostFromMap(sp.Attributes()); ok {
				got[model.Str()] = c.Total
			}
		}
		return len(got) == len(currentCalls)
	}, 30*time.Second, 200*time.Millisecond, "want %d priced calls, got %v", len(currentCalls), got)
	var sum float64
	for i, c := range currentCalls {
		assert.True(t, near(got[c.model], want[i]), "%s/%s: ours $%.9f, calcPrice $%.9f", c.provider, c.model, got[c.model], want[i])
		sum += got[c.model]
	}
	t.Logf("%d current models, Σ $%.9f, equal to calcPrice", len(currentCalls), sum)

	// Prometheus, Langfuse, LangSmith: the same sum
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := prom.Query(ctx, `sum(agentmeter_cost_usd_total)`)
		return err == nil && len(s) == 1 && near(s[0].Value, sum)
	}, 30*time.Second, 250*time.Millisecond, "prometheus cost never reached $%.9f", sum)
	traces := map[string]bool{traceID: true}
	require.Eventually(t, func() bool { return near(langfuseCost(lf, traces), sum) }, 30*time.Second, 200*time.Millisecond, "langfuse-side cost never reached $%.9f", sum)
	assert.Empty(t, lf.Problems())
	require.Eventually(t, func() bool { return near(langsmithCost(ls, traces), sum) }, 30*time.Second, 200*time.Millisecond, "langsmith-side cost never reached $%.9f", sum)
	assert.Empty(t, ls.Violations())
}
