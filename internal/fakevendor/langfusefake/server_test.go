package langfusefake

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/agentmeter/agentmeter/internal/spaniter"
)

func post(t *testing.T, s *Server, mutate func(*http.Request)) int {
	t.Helper()
	td, _, _ := AgentTrace(DefaultAgentRun())
	return postWith(t, s, td, mutate)
}

func postWith(t *testing.T, s *Server, td ptrace.Traces, mutate func(*http.Request)) int {
	t.Helper()
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, s.URL+TracesPath, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("x-langfuse-ingestion-version", "4")
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(s.PublicKey+":"+s.SecretKey)))
	if mutate != nil {
		mutate(req)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// The fake enforces what the real server does, so a broken client fails the tests.
func TestServerChecks(t *testing.T) {
	s := New(t)
	assert.Equal(t, 200, post(t, s, nil))
	assert.Empty(t, s.Problems())
	assert.Len(t, s.Observations(), 9)

	assert.Equal(t, 401, post(t, s, func(r *http.Request) { r.SetBasicAuth(s.PublicKey, "nope") }))
	assert.Equal(t, 400, post(t, s, func(r *http.Request) { r.Header.Set("x-langfuse-ingestion-version", "5") }))
	assert.Equal(t, 400, post(t, s, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }))
	assert.Equal(t, 400, post(t, s, func(r *http.Request) { r.Header.Set("Content-Encoding", "gzip") }), "not gzip")
	assert.Equal(t, 200, post(t, s, func(r *http.Request) { r.Header.Del("x-langfuse-ingestion-version") }))
	assert.Len(t, s.Problems(), 3, "content type, bad gzip, missing version: %v", s.Problems())

	s.SetMaxBodyBytes(100)
	assert.Equal(t, 413, post(t, s, nil))
	s.SetMaxBodyBytes(0)
	s.Script(Response{Status: 429, Header: http.Header{"Retry-After": {"3"}}})
	assert.Equal(t, 429, post(t, s, nil))
	assert.Equal(t, 200, post(t, s, nil))
}

// Without usage_details, the view falls back to the server's gen_ai.usage.* rules.
func TestObserveGenericUsage(t *testing.T) {
	td, _, ids := AgentTrace(DefaultAgentRun())
	var o Observation
	for sp := range spaniter.All(td) {
		if sp.SpanID() == ids[RoleSubChat1] {
			o = Observe(sp)
		}
	}
	assert.False(t, o.UsageFromDetails)
	assert.Equal(t, map[string]int64{"input": 100, "input_cached_tokens": 2000, "input_cache_creation": 500, "output": 400}, o.Usage)
	assert.Equal(t, "generation", o.Type)
	assert.Equal(t, "", o.UserID, "enduser.id is not one of Langfuse's user attributes")
	assert.Equal(t, "thread-abc", o.SessionID, "gen_ai.conversation.id is")
}

func postTraces(t *testing.T, s *Server, td ptrace.Traces) {
	t.Helper()
	require.Equal(t, http.StatusOK, postWith(t, s, td, nil))
}

// The events table keeps one row per span id and start time, replaced whole by the
// newest event: an attribute only the older version had is gone. Another start time is
// another row.
func TestRowsAreReplacedWholeBySpanIDAndStartTime(t *testing.T) {
	s := New(t)
	td, _, ids := AgentTrace(DefaultAgentRun())
	postTraces(t, s, td)
	rows := s.Rows()
	require.Len(t, rows, 9)

	one := func(mutate func(sp ptrace.Span)) ptrace.Traces {
		out := ptrace.NewTraces()
		td.CopyTo(out)
		out.ResourceSpans().At(0).ScopeSpans().At(0).Spans().RemoveIf(func(sp ptrace.Span) bool {
			return sp.SpanID() != ids[RoleLeadChat1]
		})
		mutate(out.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0))
		return out
	}
	postTraces(t, s, one(func(sp ptrace.Span) {
		sp.Attributes().PutStr("langfuse.observation.metadata.note", "v1")
		sp.Attributes().PutStr("langfuse.observation.metadata.only_v1", "x")
	}))
	postTraces(t, s, one(func(sp ptrace.Span) { sp.Attributes().PutStr("langfuse.observation.metadata.note", "v2") }))
	rows = s.Rows()
	require.Len(t, rows, 9, "same span id and start time: the row is replaced")
	lead := ByID(rows)[ids[RoleLeadChat1].String()]
	assert.Equal(t, "v2", lead.Metadata["note"])
	assert.NotContains(t, lead.Metadata, "only_v1", "nothing of the older version survives")
	assert.Len(t, s.Observations(), 11, "every event is still in the log")

	postTraces(t, s, one(func(sp ptrace.Span) { sp.SetStartTimestamp(sp.StartTimestamp() + 1) }))
	assert.Len(t, s.Rows(), 10, "another start time is another row")
}
