package fakevendor

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// AgentTraceSpans names the spans of AgentTrace by role.
type AgentTraceSpans struct {
	Lead, LeadChat, Task, Subagent, SubChat1, SearchTool, SubChat2, TitleChat pcommon.SpanID
}

// AgentTrace builds one DeerFlow-shaped run (docs/contract.md#spans) as subagentmerge leaves it:
// the lead agent, its model call that dispatched a researcher subagent through the task
// tool (with the subagent's usage merged onto it, docs/contract.md#merge), the subagent's two model
// calls and a failed web_search tool call, and a title middleware model call. seed makes
// the trace and span ids distinct per call; base is the lead agent's start time.
//
// Own usage (input/output): lead chat 1200/300 (cache read 200, cache creation 100,
// reasoning 50), subagent chats 300/50 and 200/30 (cache read 100), title chat 50/10.
// Merged onto the lead chat: 500/80, cache read 100, 1 dispatch.
func AgentTrace(seed byte, base time.Time) (ptrace.Traces, AgentTraceSpans) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(genai.AttrServiceName, "deer-flow")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("agentmeter/runtime")
	traceID := pcommon.TraceID{0xa0, seed, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	sid := func(n byte) pcommon.SpanID { return pcommon.SpanID{0xb0, seed, 0, 0, 0, 0, 0, n} }
	ids := AgentTraceSpans{Lead: sid(1), LeadChat: sid(2), Task: sid(3), Subagent: sid(4), SubChat1: sid(5), SearchTool: sid(6), SubChat2: sid(7), TitleChat: sid(8)}
	at := func(ms int) pcommon.Timestamp {
		return pcommon.NewTimestampFromTime(base.Add(time.Duration(ms) * time.Millisecond))
	}
	add := func(id, parent pcommon.SpanID, op, target, caller string, from, to int) ptrace.Span {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(traceID)
		sp.SetSpanID(id)
		sp.SetParentSpanID(parent)
		sp.SetName(genai.SpanName(op, target))
		sp.SetStartTimestamp(at(from))
		sp.SetEndTimestamp(at(to))
		a := sp.Attributes()
		a.PutStr(genai.AttrOperationName, op)
		a.PutStr(genai.AttrConversationID, "thread-42")
		a.PutStr(genai.AttrRunID, "run-7")
		a.PutStr(genai.AttrEndUserID, "user-1")
		a.PutStr(genai.AttrCaller, caller)
		switch op {
		case genai.OpChat:
			sp.SetKind(ptrace.SpanKindClient)
			a.PutStr(genai.AttrProviderName, "openai")
			a.PutStr(genai.AttrRequestModel, target)
			a.PutStr(genai.AttrResponseModel, target+"-2024")
		case genai.OpExecuteTool:
			a.PutStr(genai.AttrToolName, target)
			a.PutStr(genai.AttrToolType, genai.ToolTypeFunction)
		case genai.OpInvokeAgent:
			a.PutStr(genai.AttrAgentName, target)
		}
		return sp
	}
	add(ids.Lead, pcommon.SpanID{}, genai.OpInvokeAgent, genai.LeadAgentName, genai.BucketLeadAgent, 0, 9000)
	lc := add(ids.LeadChat, ids.Lead, genai.OpChat, "gpt-4o", genai.BucketLeadAgent, 10, 1500)
	genai.PutUsage(lc.Attributes(), genai.Usage{Input: 1200, Output: 300, CacheRead: 200, CacheCreation: 100, Reasoning: 50})
	genai.PutStrings(lc.Attributes(), genai.AttrResponseToolCallIDs, []string{"call-task-1"})
	genai.PutSubagentUsage(lc.Attributes(), genai.Usage{Input: 500, Output: 80, CacheRead: 100})
	lc.Attributes().PutInt(genai.AttrSubagentDispatches, 1)
	genai.PutStrings(lc.Attributes(), genai.AttrSubagentToolCallIDs, []string{"call-task-1"})

	task := add(ids.Task, ids.Lead, genai.OpExecuteTool, genai.TaskToolName, genai.BucketLeadAgent, 1600, 8000)
	task.Attributes().PutStr(genai.AttrToolCallID, "call-task-1")
	task.Attributes().PutStr(genai.AttrMergeStatus, genai.MergeMerged)
	task.Attributes().PutStr(genai.AttrSubagentStatus, genai.SubagentCompleted)

	sub := add(ids.Subagent, ids.Task, genai.OpInvokeAgent, "researcher", genai.SubagentCaller("researcher"), 1610, 7900)
	sub.Attributes().PutStr(genai.AttrToolCallID, "call-task-1")
	c1 := add(ids.SubChat1, ids.Subagent, genai.OpChat, "gpt-4o-mini", genai.SubagentCaller("researcher"), 1620, 3000)
	genai.PutUsage(c1.Attributes(), genai.Usage{Input: 300, Output: 50, CacheRead: 100})
	st := add(ids.SearchTool, ids.Subagent, genai.OpExecuteTool, "web_search", genai.SubagentCaller("researcher"), 3010, 5000)
	st.Status().SetCode(ptrace.StatusCodeError)
	st.Status().SetMessage("search backend timed out")
	st.Attributes().PutStr(genai.AttrErrorType, "TimeoutError")
	c2 := add(ids.SubChat2, ids.Subagent, genai.OpChat, "gpt-4o-mini", genai.SubagentCaller("researcher"), 5010, 7800)
	genai.PutUsage(c2.Attributes(), genai.Usage{Input: 200, Output: 30})
	tc := add(ids.TitleChat, ids.Lead, genai.OpChat, "gpt-4o-mini", genai.MiddlewareCaller("title"), 8100, 8900)
	genai.PutUsage(tc.Attributes(), genai.Usage{Input: 50, Output: 10})
	return td, ids
}
