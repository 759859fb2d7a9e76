package langfuse

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/exporter/langfuse/internal/shape"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// traceBatch is n runs in one batch.
func traceBatch(n int) ptrace.Traces {
	td := ptrace.NewTraces()
	for i := 0; i < n; i++ {
		langfusefake.AppendAgentTrace(td, langfusefake.DefaultAgentRun())
	}
	return td
}

// shapedSize is the decoded body size the server sees for td.
func shapedSize(t *testing.T, td ptrace.Traces) int {
	c := ptrace.NewTraces()
	td.CopyTo(c)
	shape.Traces(c)
	var m ptrace.ProtoMarshaler
	b, err := m.MarshalTraces(c)
	require.NoError(t, err)
	return len(b)
}

func TestTooLargeSplitsInHalves(t *testing.T) {
	srv := langfusefake.New(t)
	td := traceBatch(8) // 72 spans
	srv.SetMaxBodyBytes(shapedSize(t, td) * 4 / 10)
	exp, _ := started(t, testConfig(srv))
	want := map[string]bool{}
	for sp := range spaniter.All(td) {
		want[sp.SpanID().String()] = true
	}
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))

	var statuses []int
	for _, r := range srv.Requests() {
		statuses = append(statuses, r.Status)
	}
	// whole batch and both halves too large, four quarters accepted
	assert.Equal(t, []int{413, 413, 200, 200, 413, 200, 200}, statuses)
	obs := srv.Observations()
	require.Len(t, obs, 72, "every span exactly once")
	for _, o := range obs {
		assert.True(t, want[o.ID])
		delete(want, o.ID)
	}
	assert.Empty(t, srv.Problems())
	// split halves keep trace-level attributes (stamped before splitting)
	for _, o := range obs {
		assert.Equal(t, "lead-agent", o.TraceName)
	}
}

func TestSingleSpanTooLargeIsDropped(t *testing.T) {
	srv := langfusefake.New(t)
	srv.SetMaxBodyBytes(10)
	exp, _ := started(t, testConfig(srv))
	td := traceBatch(1)
	err := exp.ConsumeTraces(context.Background(), td)
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "a single span is over the server's limit")
	// every node of the binary split of 9 spans down to single spans: 1+2+4+8+2 requests
	assert.Len(t, srv.Requests(), 17)
	assert.Empty(t, srv.Observations())
}

// After a split, only the half that failed retryably is sent again.
func TestSplitRetriesOnlyTheFailedHalf(t *testing.T) {
	srv := langfusefake.New(t)
	srv.Script(
		langfusefake.Response{Status: 413},
		langfusefake.Response{Status: 200, Body: `{}`}, // first half: scripted, so not ingested...
	)
	// ...which makes the point visible: if the first half were resent it would be
	// ingested on the retry. Second half: 503 once, then accepted.
	srv.Script(langfusefake.Response{Status: 503, Header: http.Header{"Retry-After": {"0"}}})
	exp, _ := started(t, testConfig(srv))
	td := traceBatch(2) // 18 spans
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	reqs := srv.Requests()
	require.Len(t, reqs, 4)
	assert.Equal(t, []int{18, 9, 9, 9}, []int{reqs[0].Spans, reqs[1].Spans, reqs[2].Spans, reqs[3].Spans})
	assert.Equal(t, 200, reqs[3].Status)
	assert.Len(t, srv.Observations(), 9, "only the failed half was resent")
}

// A split that cuts a trace: the retried half lacks the root span, yet keeps the trace
// name and tags planned for the whole batch.
func TestSplitRetryKeepsTraceAttributes(t *testing.T) {
	srv := langfusefake.New(t)
	srv.Script(
		langfusefake.Response{Status: 413},
		langfusefake.Response{Status: 200, Body: `{}`}, // first half (has the root): not ingested
		langfusefake.Response{Status: 503},             // second half: retried alone
	)
	exp, _ := started(t, testConfig(srv))
	td := traceBatch(1) // 9 spans: 4 + 5
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	reqs := srv.Requests()
	require.Len(t, reqs, 4)
	assert.Equal(t, []int{9, 4, 5, 5}, []int{reqs[0].Spans, reqs[1].Spans, reqs[2].Spans, reqs[3].Spans})
	obs := srv.Observations()
	require.Len(t, obs, 5)
	for _, o := range obs {
		assert.NotEqual(t, "", o.ParentID, "the root was in the other half")
		assert.Equal(t, "lead-agent", o.TraceName)
		assert.Equal(t, []string{"env:production", "model:gpt-4o"}, o.Tags)
		assert.Equal(t, "user-42", o.UserID)
	}
	assert.Empty(t, srv.Problems())
}
