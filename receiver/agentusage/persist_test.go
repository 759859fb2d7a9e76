package agentusage

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// startStored starts a receiver whose held runs live in st; kill ends it the way
// kill -9 does as far as held runs go (the server goes, nothing is drained).
func startStored(t *testing.T, st *storagetest.Storage, next consumer.Traces, mut ...func(*Config)) (string, *usageReceiver) {
	t.Helper()
	return startStoredAt(t, st, next, time.Now, mut...)
}

// startStoredAt is startStored with the receiver's clock (its flush loop's and its
// holds') set to now.
func startStoredAt(t *testing.T, st *storagetest.Storage, next consumer.Traces, now func() time.Time, mut ...func(*Config)) (string, *usageReceiver) {
	t.Helper()
	id := component.MustNewID("file_storage")
	cfg := createDefaultConfig().(*Config)
	cfg.ServerConfig.NetAddr.Endpoint = freeAddr(t)
	cfg.Storage = &id
	for _, m := range mut {
		m(cfg)
	}
	rcv, err := NewFactory().CreateTraces(context.Background(), receivertest.NewNopSettings(Type), cfg, next)
	require.NoError(t, err)
	rcv.(*usageReceiver).now = now
	require.NoError(t, rcv.Start(context.Background(), st.Host(id)))
	return "http://" + cfg.ServerConfig.NetAddr.Endpoint, rcv.(*usageReceiver)
}

func kill(t *testing.T, r *usageReceiver) {
	t.Helper()
	require.NoError(t, r.server.Close())
	r.stopOnce.Do(func() { close(r.stop) })
	r.wg.Wait()
}

// A run POSTed without end_time is acknowledged and held for its PATCH. kill -9 of the
// collector must not lose it: with storage, the restarted receiver holds it again and
// the PATCH that comes after the restart completes it into one span.
func TestStoredPendingRunSurvivesRestart(t *testing.T) {
	st := storagetest.New()
	sink1 := new(consumertest.TracesSink)
	url1, r1 := startStored(t, st, sink1)
	runID := "01a22a31-cdeb-7000-8000-037a8c6bd3b1"
	code, _, resp := do(t, http.MethodPost, url1+"/runs", "application/json", []byte(lsRun(runID, "", "llm", false)), nil)
	require.Equal(t, http.StatusAccepted, code, resp)
	assert.Equal(t, 1, st.Count(prefixRun), "held run on disk before the answer")
	kill(t, r1)
	assert.Zero(t, sink1.SpanCount())

	sink2 := new(consumertest.TracesSink)
	url2, r2 := startStored(t, st, sink2)
	defer func() { require.NoError(t, r2.Shutdown(context.Background())) }()
	assert.Equal(t, 1, r2.runs.Pending(), "the restart holds the run again")
	patch := `{"end_time":"2026-01-02T03:04:09Z","outputs":{"usage_metadata":{"input_tokens":7,"output_tokens":3}}}`
	code, _, _ = do(t, http.MethodPatch, url2+"/runs/"+runID, "application/json", []byte(patch), nil)
	require.Equal(t, http.StatusAccepted, code)
	chats := spansNamed(sink2, "chat gpt-4o")
	require.Len(t, chats, 1, "POST (before the crash) and PATCH (after) make one span")
	u, _ := genai.UsageFromMap(chats[0].Attributes())
	assert.Equal(t, genai.Usage{Input: 7, Output: 3}, u)
	assert.Zero(t, st.Count(prefixRun), "an emitted run leaves nothing on disk")
}

// The same for Langfuse: a generation created without endTime (and its trace-create,
// held until the trace is quiet) survive the crash; the update after the restart
// completes the generation with the usage of its create.
func TestStoredLangfuseObservationSurvivesRestart(t *testing.T) {
	st := storagetest.New()
	// lfBatch's create events, then its update after the restart
	lines := strings.Split(lfBatch, "\n")
	createOnly := `{"batch":[` + lines[1] + strings.TrimSuffix(lines[2], ",") + `]}`
	update := `{"batch":[` + lines[3] + `]}`
	sink1 := new(consumertest.TracesSink)
	url1, r1 := startStored(t, st, sink1)
	code, _, resp := do(t, http.MethodPost, url1+"/api/public/ingestion", "application/json", []byte(createOnly), nil)
	require.Equal(t, http.StatusMultiStatus, code, resp)
	require.Equal(t, 2, st.Count(prefixObs), "the generation and its trace root are on disk")
	kill(t, r1)
	assert.Empty(t, spansNamed(sink1, "chat gpt-4o"))

	sink2 := new(consumertest.TracesSink)
	url2, r2 := startStored(t, st, sink2)
	defer func() { require.NoError(t, r2.Shutdown(context.Background())) }()
	code, _, resp = do(t, http.MethodPost, url2+"/api/public/ingestion", "application/json", []byte(update), nil)
	require.Equal(t, http.StatusMultiStatus, code, resp)
	chats := spansNamed(sink2, "chat gpt-4o")
	require.Len(t, chats, 1)
	u, _ := genai.UsageFromMap(chats[0].Attributes())
	assert.Equal(t, genai.Usage{Input: 100, Output: 20, CacheRead: 30, Reasoning: 5}, u, "the usage came with the create, before the crash")
}
