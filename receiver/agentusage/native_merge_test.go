package agentusage

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/processor/subagentmerge"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/native"
)

// A native record that names the task call its subagent made it under, but no caller,
// is not pinned on the lead: subagentmerge attributes it to the subagent from the tree
// the face builds, and merges its usage onto the lead's dispatching call.
func TestNativeRecordWithoutCallerIsAttributedByTheMerge(t *testing.T) {
	body := []byte(`{"records":[
	 {"trace_id":"0af7651916cd43dd8448eb211c80319c","run_id":"run-1","source_run_id":"lead-1","model_name":"gpt-4o",
	  "input_tokens":100,"output_tokens":10,"response_tool_call_ids":["call_1"],"start_time":"2026-01-01T00:00:00Z","end_time":"2026-01-01T00:00:01Z"},
	 {"trace_id":"0af7651916cd43dd8448eb211c80319c","run_id":"run-1","source_run_id":"sub-1","model_name":"gpt-4o-mini",
	  "input_tokens":40,"output_tokens":4,"tool_call_id":"call_1","start_time":"2026-01-01T00:00:02Z","end_time":"2026-01-01T00:00:03Z"}]}`)
	res, err := native.Decode(body, time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Equal(t, 2, res.Accepted)

	sink := new(consumertest.TracesSink)
	f := subagentmerge.NewFactory()
	p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.ConsumeTraces(context.Background(), res.Traces))
	require.NoError(t, p.Shutdown(context.Background()))

	callers := map[string]string{}
	var merged genai.Usage
	for _, td := range sink.AllTraces() {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			spans := rss.At(i).ScopeSpans().At(0).Spans()
			for j := 0; j < spans.Len(); j++ {
				s := spans.At(j)
				if s.Kind() != ptrace.SpanKindClient {
					continue
				}
				c, _ := s.Attributes().Get(genai.AttrCaller)
				callers[s.Name()] = c.AsString()
				if u, ok := genai.SubagentUsageFromMap(s.Attributes()); ok {
					merged = merged.Add(u)
				}
			}
		}
	}
	assert.Equal(t, map[string]string{"chat gpt-4o": genai.BucketLeadAgent, "chat gpt-4o-mini": genai.SubagentCaller("subagent")}, callers)
	assert.Equal(t, genai.Usage{Input: 40, Output: 4}, merged, "the subagent's call merged onto the dispatching one")
}
