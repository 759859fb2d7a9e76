package langfusefake

import (
	"crypto/rand"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// AgentRun describes the fixture trace AgentTrace builds: a DeerFlow-shaped run where the
// lead agent dispatches a subagent through the task tool, plus a middleware call.
type AgentRun struct {
	Thread, User, RunID string
	Environment         string // resource deployment.environment.name; "" for none
	LeadModel           string
	// Own usage of each chat span, in the order: lead dispatching call, subagent call 1
	// (Anthropic-style cache), subagent call 2, lead final answer, title middleware.
	Usage [5]genai.Usage
}

// DefaultAgentRun is the run used by the exporter and end-to-end tests. Usage follows
// docs/contract.md#usage (input includes cache, output includes reasoning): the lead model is
// OpenAI-style (cached prompt tokens, reasoning tokens), the subagent Anthropic-style
// (cache read and cache creation).
func DefaultAgentRun() AgentRun {
	return AgentRun{
		Thread: "thread-abc", User: "user-42", RunID: "run-7",
		Environment: "production", LeadModel: "gpt-4o",
		Usage: [5]genai.Usage{
			{Input: 1200, Output: 300, CacheRead: 200, Reasoning: 100},
			{Input: 2600, Output: 400, CacheRead: 2000, CacheCreation: 500},
			{Input: 800, Output: 150},
			{Input: 1800, Output: 200, CacheRead: 1024},
			{Input: 100, Output: 10},
		},
	}
}

// OwnTotal is the run's true usage: the sum of every chat span's own input + output.
func (r AgentRun) OwnTotal() int64 {
	var n int64
	for _, u := range r.Usage {
		n += u.Total()
	}
	return n
}

// Span ids of the fixture, by role.
const (
	RoleLead = iota
	RoleLeadChat1
	RoleTask
	RoleSubagent
	RoleSubChat1
	RoleSubTool
	RoleSubChat2
	RoleLeadChat2
	RoleTitleChat
	roleCount
)

// AgentTrace builds the run as one trace in a fresh ptrace.Traces and returns the span
// ids by role.
func AgentTrace(r AgentRun) (ptrace.Traces, pcommon.TraceID, [roleCount]pcommon.SpanID) {
	td := ptrace.NewTraces()
	tid, ids := AppendAgentTrace(td, r)
	return td, tid, ids
}

// AppendAgentTrace adds one more run (new trace id) to td.
func AppendAgentTrace(td ptrace.Traces, r AgentRun) (pcommon.TraceID, [roleCount]pcommon.SpanID) {
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(genai.AttrServiceName, "agentmeter")
	if r.Environment != "" {
		rs.Resource().Attributes().PutStr("deployment.environment.name", r.Environment)
	}
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("github.com/agentmeter/agentmeter/runtime")

	var tid pcommon.TraceID
	_, _ = rand.Read(tid[:])
	var ids [roleCount]pcommon.SpanID
	for i := range ids {
		_, _ = rand.Read(ids[i][:])
	}
	start := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	at := func(ms int) pcommon.Timestamp {
		return pcommon.NewTimestampFromTime(start.Add(time.Duration(ms) * time.Millisecond))
	}
	add := func(role, parent int, name string, kind ptrace.SpanKind, from, to int, caller string) pcommon.Map {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(tid)
		sp.SetSpanID(ids[role])
		if parent >= 0 {
			sp.SetParentSpanID(ids[parent])
		}
		sp.SetName(name)
		sp.SetKind(kind)
		sp.SetStartTimestamp(at(from))
		sp.SetEndTimestamp(at(to))
		a := sp.Attributes()
		a.PutStr(genai.AttrConversationID, r.Thread)
		a.PutStr(genai.AttrRunID, r.RunID)
		if r.User != "" {
			a.PutStr(genai.AttrEndUserID, r.User)
		}
		a.PutStr(genai.AttrCaller, caller)
		return a
	}
	chat := func(role, parent int, model, provider string, from, to int, caller string, u genai.Usage) pcommon.Map {
		a := add(role, parent, genai.SpanName(genai.OpChat, model), ptrace.SpanKindClient, from, to, caller)
		a.PutStr(genai.AttrOperationName, genai.OpChat)
		a.PutStr(genai.AttrProviderName, provider)
		a.PutStr(genai.AttrRequestModel, model)
		a.PutStr(genai.AttrResponseModel, model+"-2026-08-01")
		genai.PutUsage(a, u)
		return a
	}
	agent := func(role, parent int, name string, from, to int, caller string) {
		a := add(role, parent, genai.SpanName(genai.OpInvokeAgent, name), ptrace.SpanKindInternal, from, to, caller)
		a.PutStr(genai.AttrOperationName, genai.OpInvokeAgent)
		a.PutStr(genai.AttrAgentName, name)
	}
	tool := func(role, parent int, name, callID string, from, to int, caller string) pcommon.Map {
		a := add(role, parent, genai.SpanName(genai.OpExecuteTool, name), ptrace.SpanKindInternal, from, to, caller)
		a.PutStr(genai.AttrOperationName, genai.OpExecuteTool)
		a.PutStr(genai.AttrToolName, name)
		a.PutStr(genai.AttrToolCallID, callID)
		a.PutStr(genai.AttrToolType, genai.ToolTypeFunction)
		return a
	}
	lead := genai.LeadAgentName
	sub := genai.SubagentCaller("research")

	agent(RoleLead, -1, genai.LeadAgentName, 0, 9000, lead)
	c1 := chat(RoleLeadChat1, RoleLead, r.LeadModel, "openai", 10, 900, lead, r.Usage[0])
	genai.PutStrings(c1, genai.AttrResponseToolCallIDs, []string{"call_task_1"})
	c1.PutStr(genai.AttrStepKind, genai.StepSubagentDispatch)
	task := tool(RoleTask, RoleLead, genai.TaskToolName, "call_task_1", 910, 6000, lead)
	task.PutStr(genai.AttrSubagentStatus, genai.SubagentCompleted)
	agent(RoleSubagent, RoleTask, "research", 920, 5990, sub)
	chat(RoleSubChat1, RoleSubagent, "claude-sonnet-4", "anthropic", 930, 3000, sub, r.Usage[1])
	tool(RoleSubTool, RoleSubagent, "web_search", "call_ws_1", 3010, 4000, sub)
	chat(RoleSubChat2, RoleSubagent, "claude-sonnet-4", "anthropic", 4010, 5900, sub, r.Usage[2])
	chat(RoleLeadChat2, RoleLead, r.LeadModel, "openai", 6010, 8000, lead, r.Usage[3])
	chat(RoleTitleChat, RoleLead, "gpt-4o-mini", "openai", 8010, 8900, genai.MiddlewareCaller("title"), r.Usage[4])

	// what processor/subagentmerge writes (docs/contract.md#merge): the subagent's usage on the
	// dispatching chat span, the merge status on the task span.
	genai.PutSubagentUsage(c1, r.Usage[1].Add(r.Usage[2]))
	c1.PutInt(genai.AttrSubagentDispatches, 1)
	genai.PutStrings(c1, genai.AttrSubagentToolCallIDs, []string{"call_task_1"})
	task.PutStr(genai.AttrMergeStatus, genai.MergeMerged)
	return tid, ids
}
