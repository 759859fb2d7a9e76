package langsmith

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmeter/agentmeter/exporter/internal/vendortest"
	"github.com/agentmeter/agentmeter/internal/dottedorder"
	"github.com/agentmeter/agentmeter/internal/envconfig"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/fakevendor/faulty"
)

const testKey = "lsv2_pt_never_log_me"

var base = time.Date(2026, 5, 6, 7, 8, 9, 987654321, time.UTC)

type harness struct {
	exp  exporter.Traces
	logs *observer.ObservedLogs
}

// start builds the exporter against the fake with fast retries and no queue, so
// ConsumeTraces returns the final outcome.
func start(t *testing.T, fake *fakevendor.LangSmith, mutate func(*Config)) (*harness, error) {
	t.Helper()
	return startOn(t, fake, componenttest.NewNopHost(), exportertest.NewNopSettings(componentType).ID, mutate)
}

// startOn is start on host, as component id.
func startOn(t *testing.T, fake *fakevendor.LangSmith, host component.Host, id component.ID, mutate func(*Config)) (*harness, error) {
	t.Helper()
	cfg := newDefaultConfig(envconfig.FromMap(map[string]string{"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": testKey}))
	cfg.ClientConfig.Endpoint = fake.URL
	cfg.Project = "test-project"
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.InitialInterval = 10 * time.Millisecond
	cfg.RetryConfig.MaxInterval = 50 * time.Millisecond
	cfg.RetryConfig.MaxElapsedTime = 10 * time.Second
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	core, logs := observer.New(zapcore.DebugLevel)
	set := exportertest.NewNopSettings(componentType)
	set.ID = id
	set.Logger = zap.New(core)
	exp, err := NewFactory().CreateTraces(context.Background(), set, cfg)
	require.NoError(t, err)
	h := &harness{exp: exp, logs: logs}
	t.Cleanup(func() {
		require.NoError(t, exp.Shutdown(context.Background()))
		for _, e := range logs.All() {
			assert.NotContains(t, e.Message, testKey)
			for k, v := range e.ContextMap() {
				assert.NotContains(t, k+"="+toString(v), testKey, "secret in log %q", e.Message)
			}
		}
	})
	return h, exp.Start(context.Background(), host)
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(fmtAny(v), "\n", " "), "\t", " "))
}

func mustStart(t *testing.T, fake *fakevendor.LangSmith, mutate func(*Config)) *harness {
	t.Helper()
	h, err := start(t, fake, mutate)
	require.NoError(t, err)
	return h
}

// mustStartOn is startOn that must start.
func mustStartOn(t *testing.T, fake *fakevendor.LangSmith, host component.Host, id component.ID, mutate func(*Config)) *harness {
	t.Helper()
	h, err := startOn(t, fake, host, id, mutate)
	require.NoError(t, err)
	return h
}

func newFake(t *testing.T) *fakevendor.LangSmith {
	f := fakevendor.NewLangSmith(testKey)
	t.Cleanup(f.Close)
	return f
}

func runsByName(f *fakevendor.LangSmith) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, r := range f.Runs() {
		out[r["name"].(string)] = r
	}
	return out
}

func TestFullAgentTrace(t *testing.T) {
	fake := newFake(t)
	h := mustStart(t, fake, nil)
	td, ids := fakevendor.AgentTrace(1, base)
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), td))
	require.Empty(t, fake.Violations())
	require.Equal(t, 8, fake.RunCount())
	reqs := fake.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "/runs/multipart", reqs[0].Path)
	assert.Equal(t, "zstd", reqs[0].Encoding)

	traceUUID := dottedorder.TraceUUID(td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID())
	runs := runsByName(fake)
	lead := runs["invoke_agent lead_agent"]
	assert.Equal(t, traceUUID, lead["id"])
	assert.Equal(t, traceUUID, lead["trace_id"])
	assert.Equal(t, "chain", lead["run_type"])
	assert.Equal(t, "test-project", lead["session_name"])
	assert.Equal(t, "20260506T070809987654Z"+traceUUID, lead["dotted_order"])

	var in, out float64
	types := map[string]int{}
	for _, r := range fake.Runs() {
		types[r["run_type"].(string)]++
		md := r["extra"].(map[string]any)["metadata"].(map[string]any)
		assert.Equal(t, "thread-42", md["thread_id"])
		assert.Equal(t, "thread-42", md["session_id"])
		if um, ok := r["outputs"].(map[string]any)["usage_metadata"].(map[string]any); ok {
			in += um["input_tokens"].(float64)
			out += um["output_tokens"].(float64)
		}
	}
	assert.Equal(t, map[string]int{"chain": 2, "llm": 4, "tool": 2}, types)
	assert.Equal(t, float64(1200+300+200+50), in, "LangSmith's trace total is the sum of own usage: merged usage is not counted again")
	assert.Equal(t, float64(300+50+30+10), out)

	chat := runs["chat gpt-4o"]
	assert.Equal(t, map[string]any{"input_tokens": 1200.0, "output_tokens": 300.0, "total_tokens": 1500.0,
		"input_token_details":  map[string]any{"cache_read": 200.0, "cache_creation": 100.0},
		"output_token_details": map[string]any{"reasoning": 50.0}}, chat["outputs"].(map[string]any)["usage_metadata"])
	md := chat["extra"].(map[string]any)["metadata"].(map[string]any)
	assert.Equal(t, "openai", md["ls_provider"])
	assert.Equal(t, "gpt-4o", md["ls_model_name"])
	assert.Equal(t, "lead_agent", md["caller"])
	assert.Equal(t, map[string]any{
		"usage":         map[string]any{"input_tokens": 500.0, "output_tokens": 80.0, "total_tokens": 580.0, "input_token_details": map[string]any{"cache_read": 100.0}},
		"dispatches":    1.0,
		"tool_call_ids": []any{"call-task-1"},
	}, md["subagent_usage"])

	search := runs["execute_tool web_search"]
	assert.Equal(t, "error", search["status"])
	assert.Equal(t, "search backend timed out", search["error"])
	assert.Equal(t, dottedorder.SpanUUID(ids.Subagent), search["parent_run_id"])
}

// The exporter declares MutatesData false: it reads the batch it was given and never
// writes to it (a read-only batch panics on a write), also when it splits and retries.
func TestInputNotMutated(t *testing.T) {
	fake := newFake(t)
	front, endpoint := behindFront(t, fake)
	front.Script( // a split, and a retry of the half that failed
		faulty.Fault{Kind: faulty.Status, Status: http.StatusRequestEntityTooLarge},
		faulty.Fault{},
		faulty.Fault{Kind: faulty.Status, Status: http.StatusServiceUnavailable},
	)
	h := mustStart(t, fake, endpoint)
	assert.False(t, h.exp.Capabilities().MutatesData)
	td, _ := fakevendor.AgentTrace(1, base)
	vendortest.ConsumeReadOnly(t, h.exp, td)
	assert.Equal(t, 8, fake.RunCount())
}

func TestMultipart404FallsBackToBatch(t *testing.T) {
	fake := newFake(t)
	fake.DisableMultipart()
	h := mustStart(t, fake, nil)
	for seed := byte(1); seed <= 2; seed++ {
		td, _ := fakevendor.AgentTrace(seed, base)
		require.NoError(t, h.exp.ConsumeTraces(context.Background(), td))
	}
	assert.Equal(t, 16, fake.RunCount())
	assert.Empty(t, fake.Violations())
	var paths []string
	for _, r := range fake.Requests() {
		paths = append(paths, r.Path)
	}
	assert.Equal(t, []string{"/runs/multipart", "/runs/batch", "/runs/batch"}, paths)
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("sending to /runs/batch from now on").Len(), "said once")
}

func TestInfoWithoutMultipartUsesBatchFromTheStart(t *testing.T) {
	fake := newFake(t)
	fake.SetInfo(&fakevendor.LangSmithInfo{UseMultipart: false, SizeLimit: 100, SizeLimitBytes: 1 << 20})
	h := mustStart(t, fake, nil)
	td, _ := fakevendor.AgentTrace(1, base)
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), td))
	reqs := fake.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "/runs/batch", reqs[0].Path)
	assert.Empty(t, fake.Violations())
}

func TestRateLimitedThenDelivered(t *testing.T) {
	fake := newFake(t)
	fake.Script(fakevendor.LangSmithResponse{Status: 429, RetryAfter: "1", Body: `{"detail":"Rate limit exceeded"}`})
	h := mustStart(t, fake, nil)
	td, _ := fakevendor.AgentTrace(1, base)
	began := time.Now()
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), td))
	assert.GreaterOrEqual(t, time.Since(began), time.Second, "Retry-After honoured")
	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, 429, reqs[0].Status)
	assert.Equal(t, 8, fake.RunCount())
	assert.Empty(t, fake.Violations())
}

func TestServerErrorBurst(t *testing.T) {
	fake := newFake(t)
	for _, code := range []int{500, 502, 503, 504, 408, 425} {
		fake.Script(fakevendor.LangSmithResponse{Status: code, Body: "try later"})
	}
	h := mustStart(t, fake, nil)
	td, _ := fakevendor.AgentTrace(1, base)
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), td))
	assert.Len(t, fake.Requests(), 7)
	assert.Equal(t, 8, fake.RunCount())
	assert.Empty(t, fake.Violations())
}

func TestConflictCountsAsDelivered(t *testing.T) {
	fake := newFake(t)
	fake.Script(fakevendor.LangSmithResponse{Status: 409, Body: `{"detail":"run already exists"}`})
	h := mustStart(t, fake, nil)
	td, _ := fakevendor.AgentTrace(1, base)
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), td))
	assert.Len(t, fake.Requests(), 1, "409 is not retried")
}

func TestPermanentErrorCarriesServerMessage(t *testing.T) {
	fake := newFake(t)
	fake.Script(fakevendor.LangSmithResponse{Status: 422, Body: `{"detail":"invalid 'dotted_order'"}`})
	h := mustStart(t, fake, nil)
	td, _ := fakevendor.AgentTrace(1, base)
	err := h.exp.ConsumeTraces(context.Background(), td)
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "HTTP 422: invalid 'dotted_order'")
	assert.Len(t, fake.Requests(), 1, "not retried")
}

func TestOversizeBatchSplitByInfoLimits(t *testing.T) {
	fake := newFake(t)
	fake.SetInfo(&fakevendor.LangSmithInfo{UseMultipart: true, SizeLimit: 3, SizeLimitBytes: 20 << 20})
	h := mustStart(t, fake, nil)
	td, _ := fakevendor.AgentTrace(1, base)
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), td))
	var counts []int
	for _, r := range fake.Requests() {
		counts = append(counts, len(r.RunIDs))
	}
	sort.Ints(counts) // chunks are sent side by side
	assert.Equal(t, []int{2, 3, 3}, counts)
	assert.Equal(t, 8, fake.RunCount())
	assert.Empty(t, fake.Violations())

	// a byte limit that fits about two runs per request
	fake2 := newFake(t)
	fake2.SetInfo(&fakevendor.LangSmithInfo{UseMultipart: true, SizeLimit: 100, SizeLimitBytes: 4000})
	h2 := mustStart(t, fake2, nil)
	require.NoError(t, h2.exp.ConsumeTraces(context.Background(), td))
	reqs := fake2.Requests()
	assert.Greater(t, len(reqs), 2)
	for _, r := range reqs {
		if len(r.RunIDs) > 1 {
			assert.LessOrEqual(t, r.RawBytes, 4000)
		}
	}
	assert.Equal(t, 8, fake2.RunCount())
	assert.Empty(t, fake2.Violations())
}

// After a retryable failure of the second chunk only the undelivered spans are retried.
func TestPartialFailureRetriesOnlyTheRest(t *testing.T) {
	fake := newFake(t)
	fake.SetInfo(&fakevendor.LangSmithInfo{UseMultipart: true, SizeLimit: 3, SizeLimitBytes: 20 << 20})
	fake.Script(fakevendor.LangSmithResponse{Status: 202}, fakevendor.LangSmithResponse{Status: 503})
	h := mustStart(t, fake, nil)
	td, _ := fakevendor.AgentTrace(1, base)
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), td))
	seen := map[string]int{}
	for _, r := range fake.Requests() {
		if r.Status/100 == 2 {
			for _, id := range r.RunIDs {
				seen[id]++
			}
		}
	}
	assert.Len(t, seen, 8)
	for id, n := range seen {
		assert.Equal(t, 1, n, "run %s delivered more than once", id)
	}
	assert.Len(t, fake.Requests(), 4) // 3 ok, 3 refused, 3 ok, 2 ok
	assert.Empty(t, fake.Violations())
}

func TestCheckCredentials(t *testing.T) {
	fake := newFake(t)
	_, err := start(t, fake, func(c *Config) { c.CheckCredentials = true; c.APIKey = "wrong-key-value" })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "LangSmith rejected the credentials (HTTP 401 on /sessions)")
	assert.Contains(t, err.Error(), "LANGSMITH_API_KEY")
	assert.NotContains(t, err.Error(), "wrong-key-value")

	h := mustStart(t, fake, func(c *Config) { c.CheckCredentials = true })
	assert.NotNil(t, h)

	// an unreachable server does not stop the collector
	down := fakevendor.NewLangSmith(testKey)
	down.Close()
	h, err = start(t, down, func(c *Config) { c.CheckCredentials = true })
	require.NoError(t, err)
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("credential check could not complete").Len())
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("/info unavailable").Len())
}

func TestDisabledDropsAndSaysSoOnce(t *testing.T) {
	fake := newFake(t)
	h := mustStart(t, fake, func(c *Config) { c.Enabled = false; c.APIKey = "" })
	for seed := byte(1); seed <= 3; seed++ {
		td, _ := fakevendor.AgentTrace(seed, base)
		require.NoError(t, h.exp.ConsumeTraces(context.Background(), td))
	}
	assert.Empty(t, fake.Requests())
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("LangSmith tracing is disabled").Len())
}

func TestTenantHeaderAndEmptyTraces(t *testing.T) {
	fake := newFake(t)
	h := mustStart(t, fake, func(c *Config) { c.TenantID = "ws-1" })
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), ptrace.NewTraces()))
	assert.Empty(t, fake.Requests(), "nothing to send, no request")
	td, _ := fakevendor.AgentTrace(1, base)
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), td))
	require.Len(t, fake.Requests(), 1)
	assert.Equal(t, "ws-1", fake.Requests()[0].TenantID)
}

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, "langsmith", f.Type().String())
	assert.Equal(t, stability, f.TracesStability())
	require.NoError(t, componenttest.CheckConfigStruct(f.CreateDefaultConfig()))
}

func fmtAny(v any) string { return fmt.Sprint(v) }

// With the default in-memory queue, shutdown drains what was accepted and leaves no
// goroutine behind (goleak in TestMain).
func TestQueuedLifecycle(t *testing.T) {
	fake := newFake(t)
	cfg := newDefaultConfig(envconfig.FromMap(map[string]string{"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": testKey}))
	cfg.ClientConfig.Endpoint = fake.URL
	exp, err := NewFactory().CreateTraces(context.Background(), exportertest.NewNopSettings(componentType), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	for seed := byte(1); seed <= 5; seed++ {
		td, _ := fakevendor.AgentTrace(seed, base)
		require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	}
	require.NoError(t, exp.Shutdown(context.Background()))
	assert.Equal(t, 40, fake.RunCount())
	assert.Empty(t, fake.Violations())
}
