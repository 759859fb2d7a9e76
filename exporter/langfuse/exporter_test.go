package langfuse

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/exporter/internal/vendortest"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/envconfig"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// testConfig is an enabled config for srv, with fast retries and no queue, so
// ConsumeTraces returns the final outcome of every request.
func testConfig(srv *langfusefake.Server) *Config {
	cfg := newConfig(envconfig.FromMap(nil))
	cfg.Enabled = true
	cfg.Endpoint = srv.URL
	cfg.PublicKey, cfg.SecretKey = "pk-lf-fake-public", "sk-lf-fake-secret"
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.InitialInterval = 5 * time.Millisecond
	cfg.RetryConfig.MaxInterval = 20 * time.Millisecond
	cfg.RetryConfig.MaxElapsedTime = 10 * time.Second
	return cfg
}

// started creates and starts the exporter through its factory, logging into an observer.
func started(t *testing.T, cfg *Config) (exporter.Traces, *observer.ObservedLogs) {
	t.Helper()
	exp, logs, err := start(t, cfg)
	require.NoError(t, err)
	return exp, logs
}

func start(t *testing.T, cfg *Config) (exporter.Traces, *observer.ObservedLogs, error) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	set := exportertest.NewNopSettings(componentType)
	set.Logger = zap.New(core)
	exp, err := NewFactory().CreateTraces(context.Background(), set, cfg)
	require.NoError(t, err)
	err = exp.Start(context.Background(), componenttest.NewNopHost())
	t.Cleanup(func() { assert.NoError(t, exp.Shutdown(context.Background())) })
	return exp, logs, err
}

// assertNoSecrets checks every log line (message and fields) and err for the keys.
func assertNoSecrets(t *testing.T, logs *observer.ObservedLogs, errs ...error) {
	t.Helper()
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	for _, e := range logs.All() {
		buf, err := enc.EncodeEntry(e.Entry, e.Context)
		require.NoError(t, err)
		line := buf.String()
		for _, secret := range []string{"sk-lf-fake-secret", "sk-lf-wrong", "Basic "} {
			assert.NotContains(t, line, secret)
		}
	}
	for _, err := range errs {
		if err != nil {
			assert.NotContains(t, err.Error(), "sk-lf-fake-secret")
			assert.NotContains(t, err.Error(), "sk-lf-wrong")
		}
	}
}

func TestFullAgentTrace(t *testing.T) {
	srv := langfusefake.New(t)
	exp, logs := started(t, testConfig(srv))
	run := langfusefake.DefaultAgentRun()
	td, tid, ids := langfusefake.AgentTrace(run)
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))

	require.Empty(t, srv.Problems())
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, http.StatusOK, reqs[0].Status)
	assert.True(t, reqs[0].Gzip, "gzip by default")
	assert.Equal(t, "4", reqs[0].Header.Get("x-langfuse-ingestion-version"))
	assert.Equal(t, "application/x-protobuf", reqs[0].Header.Get("Content-Type"))
	assert.Contains(t, reqs[0].Header.Get("User-Agent"), "agentmeter")

	obs := srv.Observations()
	require.Len(t, obs, 9)
	byID := langfusefake.ByID(obs)
	for _, o := range obs {
		assert.Equal(t, tid.String(), o.TraceID, "hex trace id")
		assert.Len(t, o.ID, 16)
		assert.Equal(t, "thread-abc", o.SessionID, "session on every observation (%s)", o.Name)
		assert.Equal(t, "user-42", o.UserID, o.Name)
		assert.Equal(t, "lead-agent", o.TraceName, o.Name)
		assert.Equal(t, []string{"env:production", "model:gpt-4o"}, o.Tags, o.Name)
		assert.NotEmpty(t, o.Metadata["caller"], o.Name)
	}
	obsOf := func(role int) langfusefake.Observation { return byID[ids[role].String()] }
	assert.Equal(t, "", obsOf(langfusefake.RoleLead).ParentID)
	assert.Equal(t, ids[langfusefake.RoleTask].String(), obsOf(langfusefake.RoleSubagent).ParentID)

	types := map[int]string{
		langfusefake.RoleLead: "agent", langfusefake.RoleSubagent: "agent",
		langfusefake.RoleTask: "tool", langfusefake.RoleSubTool: "tool",
		langfusefake.RoleLeadChat1: "generation", langfusefake.RoleLeadChat2: "generation",
		langfusefake.RoleSubChat1: "generation", langfusefake.RoleSubChat2: "generation", langfusefake.RoleTitleChat: "generation",
	}
	for role, want := range types {
		assert.Equal(t, want, obsOf(role).Type, obsOf(role).Name)
	}
	assert.Equal(t, "gpt-4o-2026-08-01", obsOf(langfusefake.RoleLeadChat1).Model, "response model wins")
	assert.Equal(t, "web_search", obsOf(langfusefake.RoleSubTool).Name)

	// exclusive buckets per generation
	wantUsage := map[int]map[string]int64{
		langfusefake.RoleLeadChat1: {"input": 1000, "input_cached_tokens": 200, "output": 200, "output_reasoning_tokens": 100, "total": 1500},
		langfusefake.RoleSubChat1:  {"input": 100, "input_cached_tokens": 2000, "input_cache_creation": 500, "output": 400, "total": 3000},
		langfusefake.RoleSubChat2:  {"input": 800, "output": 150, "total": 950},
		langfusefake.RoleLeadChat2: {"input": 776, "input_cached_tokens": 1024, "output": 200, "total": 2000},
		langfusefake.RoleTitleChat: {"input": 100, "output": 10, "total": 110},
	}
	for role, want := range wantUsage {
		o := obsOf(role)
		assert.True(t, o.UsageFromDetails, o.Name)
		assert.Equal(t, want, o.Usage, o.Name)
	}
	for _, role := range []int{langfusefake.RoleLead, langfusefake.RoleSubagent, langfusefake.RoleTask, langfusefake.RoleSubTool} {
		assert.Empty(t, obsOf(role).Usage, obsOf(role).Name)
	}

	// Langfuse's trace total is the run's own usage: subagent usage merged onto the
	// dispatching call is metadata, not usage.
	assert.Equal(t, run.OwnTotal(), langfusefake.TraceUsage(obs)[tid.String()])
	d := obsOf(langfusefake.RoleLeadChat1)
	sub := run.Usage[1].Add(run.Usage[2])
	assert.EqualValues(t, sub.Total(), d.Metadata["subagent_total_tokens"])
	assert.EqualValues(t, sub.Input, d.Metadata["subagent_input_tokens"])
	assert.EqualValues(t, sub.CacheRead, d.Metadata["subagent_cache_read_input_tokens"])
	assert.EqualValues(t, 1, d.Metadata["subagent_dispatches"])
	assert.Equal(t, "lead_agent", d.Metadata["caller"])
	assert.Equal(t, "subagent:research", obsOf(langfusefake.RoleSubChat1).Metadata["caller"])
	assert.Equal(t, "merged", obsOf(langfusefake.RoleTask).Metadata["merge_status"])

	// content attributes are not invented
	for _, o := range obs {
		assert.NotContains(t, o.Attributes, genai.AttrInputMessages)
		assert.NotContains(t, o.Attributes, genai.AttrOutputMessages)
	}
	assertNoSecrets(t, logs)
}

// Content passes through when the emitter opted in.
func TestContentPassesThrough(t *testing.T) {
	srv := langfusefake.New(t)
	exp, _ := started(t, testConfig(srv))
	td, _, ids := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	msgs := `[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`
	for sp := range spaniter.All(td) {
		if sp.SpanID() == ids[langfusefake.RoleLeadChat2] {
			sp.Attributes().PutStr(genai.AttrInputMessages, msgs)
		}
	}
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	o := langfusefake.ByID(srv.Observations())[ids[langfusefake.RoleLeadChat2].String()]
	assert.Equal(t, msgs, o.Attributes[genai.AttrInputMessages])
}

// No user known: DeerFlow's "default"; no environment: only the model tag.
func TestDefaultsWithoutUserAndEnv(t *testing.T) {
	srv := langfusefake.New(t)
	exp, _ := started(t, testConfig(srv))
	run := langfusefake.DefaultAgentRun()
	run.User, run.Environment = "", ""
	td, _, _ := langfusefake.AgentTrace(run)
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	for _, o := range srv.Observations() {
		assert.Equal(t, "default", o.UserID)
		assert.Equal(t, []string{"model:gpt-4o"}, o.Tags)
	}
}

func TestRetryAfter429ThenSuccess(t *testing.T) {
	srv := langfusefake.New(t)
	srv.Script(langfusefake.Response{Status: http.StatusTooManyRequests,
		Header: http.Header{"Retry-After": {"1"}},
		Body:   `{"message":"Rate limit exceeded","code":"rate_limited"}`})
	exp, _ := started(t, testConfig(srv))
	td, _, _ := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, http.StatusTooManyRequests, reqs[0].Status)
	assert.Equal(t, http.StatusOK, reqs[1].Status)
	// the backoff is 5 ms; only Retry-After explains a one-second gap
	assert.GreaterOrEqual(t, reqs[1].At.Sub(reqs[0].At), 950*time.Millisecond)
	assert.Len(t, srv.Observations(), 9)
	assert.Empty(t, srv.Problems())
}

func TestServerErrorBurst(t *testing.T) {
	srv := langfusefake.New(t)
	srv.Script(
		langfusefake.Response{Status: 500, Body: `{"error":"Internal Server Error"}`},
		langfusefake.Response{Status: 502, Body: `bad gateway`},
		langfusefake.Response{Status: 503, Body: `{"message":"unavailable"}`},
		langfusefake.Response{Status: 504},
		langfusefake.Response{Status: 500, Body: `{"message":"blob storage"}`},
	)
	exp, logs := started(t, testConfig(srv))
	td, _, _ := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	reqs := srv.Requests()
	require.Len(t, reqs, 6)
	assert.Equal(t, http.StatusOK, reqs[5].Status)
	assert.Len(t, srv.Observations(), 9, "ingested once")
	assert.Equal(t, 5, logs.FilterMessageSnippet("Will retry").Len())
}

func TestBadRequestNotRetried(t *testing.T) {
	srv := langfusefake.New(t)
	srv.Script(langfusefake.Response{Status: 400, Body: `{"message":"Invalid span: attributes must be an array"}`})
	exp, logs := started(t, testConfig(srv))
	td, _, _ := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	err := exp.ConsumeTraces(context.Background(), td)
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "Invalid span: attributes must be an array")
	assert.Len(t, srv.Requests(), 1, "not retried")
	entries := logs.FilterMessageSnippet("Langfuse rejected a batch").All()
	require.Len(t, entries, 1)
	assert.Equal(t, "Invalid span: attributes must be an array", entries[0].ContextMap()["server_message"])
}

func TestWrongCredentialsPermanent(t *testing.T) {
	srv := langfusefake.New(t)
	cfg := testConfig(srv)
	cfg.SecretKey = "sk-lf-wrong"
	exp, logs := started(t, cfg)
	td, _, _ := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	err := exp.ConsumeTraces(context.Background(), td)
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "langfuse rejected the credentials (HTTP 401)")
	assert.Contains(t, err.Error(), "LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY")
	assert.Len(t, srv.Requests(), 1)
	assertNoSecrets(t, logs, err)

	srv.Script(langfusefake.Response{Status: 403, Body: `{"message":"Ingestion suspended: Usage threshold exceeded"}`})
	exp2, _ := started(t, testConfig(srv))
	err = exp2.ConsumeTraces(context.Background(), td)
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "HTTP 403")
	assert.Contains(t, err.Error(), "Ingestion suspended")
}

func TestNetworkErrorIsRetryable(t *testing.T) {
	srv := langfusefake.New(t)
	cfg := testConfig(srv)
	srv.Close() // nothing listens any more
	cfg.RetryConfig.Enabled = false
	exp, logs := started(t, cfg)
	err := exp.ConsumeTraces(context.Background(), traceBatch(1))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err), "network errors are retried: %v", err)
	assertNoSecrets(t, logs, err)
}

func TestCheckCredentials(t *testing.T) {
	srv := langfusefake.New(t)
	cfg := testConfig(srv)
	cfg.CheckCredentials = true
	_, logs := started(t, cfg)
	assert.Equal(t, 1, srv.ProjectCalls())
	assert.Equal(t, 1, logs.FilterMessage("Langfuse credentials checked").Len())
	assert.Empty(t, srv.Problems(), "the projects answer matches the spec's Projects schema")

	cfg = testConfig(srv)
	cfg.CheckCredentials = true
	cfg.SecretKey = "sk-lf-wrong"
	_, logs, err := start(t, cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "langfuse credential check failed: langfuse rejected the credentials (HTTP 401)")
	assertNoSecrets(t, logs, err)

	srv.SetNoProject(true)
	cfg = testConfig(srv)
	cfg.CheckCredentials = true
	_, _, err = start(t, cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bound to no project")
}

func TestCheckCredentialsUnreachableStarts(t *testing.T) {
	srv := langfusefake.New(t)
	cfg := testConfig(srv)
	cfg.CheckCredentials = true
	srv.Close()
	_, logs, err := start(t, cfg)
	require.NoError(t, err, "a network error must not keep the collector down")
	entries := logs.FilterMessageSnippet("Could not reach Langfuse").All()
	require.Len(t, entries, 1)
	assert.NotContains(t, fmt.Sprint(entries[0].ContextMap()), srv.URL, "the endpoint is never logged")
}

func TestDisabledDropsAndLogsOnce(t *testing.T) {
	srv := langfusefake.New(t)
	cfg := newConfig(envconfig.FromMap(map[string]string{"LANGFUSE_TRACING": "false", "LANGFUSE_SECRET_KEY": "sk-lf-fake-secret"}))
	cfg.Endpoint = srv.URL
	exp, logs := started(t, cfg)
	for i := 0; i < 3; i++ {
		require.NoError(t, exp.ConsumeTraces(context.Background(), traceBatch(1)))
	}
	assert.Empty(t, srv.Requests())
	entries := logs.FilterMessageSnippet("disabled").All()
	require.Len(t, entries, 1)
	assert.Equal(t, `LANGFUSE_TRACING is "false"`, entries[0].ContextMap()["reason"])
	assertNoSecrets(t, logs)
}

func TestServerMessageIsCut(t *testing.T) {
	resp := &http.Response{StatusCode: 400, Body: ioNop(strings.Repeat("x", 2000))}
	assert.Len(t, serverMessage(resp), maxServerMessage+len("…"))
	resp = &http.Response{StatusCode: 502, Body: ioNop("")}
	assert.Equal(t, "Bad Gateway", serverMessage(resp))
}

// The exporter declares MutatesData false: the batch it was given is left as it was.
func TestInputNotMutated(t *testing.T) {
	srv := langfusefake.New(t)
	exp, _ := started(t, testConfig(srv))
	assert.False(t, exp.Capabilities().MutatesData)
	vendortest.ConsumeReadOnly(t, exp, traceBatch(3))
	assert.Len(t, srv.Observations(), 27)
}

func TestCompressionNone(t *testing.T) {
	srv := langfusefake.New(t)
	cfg := testConfig(srv)
	cfg.Compression = "none"
	exp, _ := started(t, cfg)
	require.NoError(t, exp.ConsumeTraces(context.Background(), traceBatch(1)))
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.False(t, reqs[0].Gzip)
	assert.Equal(t, reqs[0].EncodedBytes, reqs[0].DecodedBytes)
	assert.Len(t, srv.Observations(), 9)
	assert.Empty(t, srv.Problems())
}

// Queue consumers push concurrently: pooled plans, splicers and gzip writers must not
// mix requests (run with -race).
func TestConcurrentPushes(t *testing.T) {
	srv := langfusefake.New(t)
	cfg := testConfig(srv)
	q := exporterhelper.NewDefaultQueueConfig()
	q.NumConsumers = 4
	cfg.QueueConfig = configoptional.Some(q)
	exp, err := NewFactory().CreateTraces(context.Background(), exportertest.NewNopSettings(componentType), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, exp.ConsumeTraces(context.Background(), traceBatch(1+i%3)))
		}()
	}
	wg.Wait()
	require.NoError(t, exp.Shutdown(context.Background())) // drains the queue
	obs := srv.Observations()
	want := 0
	for i := 0; i < 40; i++ {
		want += 9 * (1 + i%3)
	}
	assert.Len(t, obs, want)
	assert.Len(t, langfusefake.ByID(obs), want, "every span once, none garbled into another")
	assert.Empty(t, srv.Problems())
	for tid, total := range langfusefake.TraceUsage(obs) {
		assert.Equal(t, langfusefake.DefaultAgentRun().OwnTotal(), total, tid)
	}
}

// The sending queue's consumers send at once; over HTTP/1.1 each keeps its connection
// (max_idle_conns_per_host), so the exporter does not dial a new one for most requests.
func TestQueueConsumersKeepTheirConnections(t *testing.T) {
	var conns, spans atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond) // requests overlap
		spans.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	cfg := newConfig(envconfig.FromMap(nil))
	cfg.Enabled, cfg.Endpoint, cfg.PublicKey, cfg.SecretKey = true, srv.URL, "pk-lf-test", "sk-lf-test"
	q := vendorhttp.DefaultQueueConfig()
	q.Batch = configoptional.None[exporterhelper.BatchConfig]() // one request per batch
	cfg.QueueConfig = configoptional.Some(q)
	exp, _, err := start(t, cfg)
	require.NoError(t, err)

	const requests = 300
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for range requests / 6 {
				assert.NoError(t, exp.ConsumeTraces(context.Background(), traceBatch(1)))
			}
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool { return spans.Load() == requests }, 10*time.Second, 10*time.Millisecond)
	// about one a consumer: a request may dial before another consumer's connection is
	// back in the pool; without the idle connections kept, most requests dial (about 140)
	assert.LessOrEqual(t, conns.Load(), int64(2*q.NumConsumers), "a connection per consumer, kept (%d requests)", requests)
}
