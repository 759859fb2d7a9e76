package merge

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// randomTree writes a random agent trace: a lead agent run whose children are model
// calls, plain tools, task tools running a subagent (which recurse), agent runs no tool
// dispatched (a graph's inner agent) and chain spans, in the span shapes of the
// conventions genai recognises. want maps each model call's span id to the caller the
// attribution must leave on it ("" = none, the lead's).
type randomTree struct {
	r    *rand.Rand
	ss   ptrace.SpanSlice
	next uint64
	want map[pcommon.SpanID]string
}

func (g *randomTree) span(parent pcommon.SpanID, name string, kv ...string) ptrace.Span {
	g.next++
	sp := g.ss.AppendEmpty()
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], g.next)
	sp.SetSpanID(id)
	sp.SetParentSpanID(parent)
	sp.SetName(name)
	for i := 0; i+1 < len(kv); i += 2 {
		sp.Attributes().PutStr(kv[i], kv[i+1])
	}
	return sp
}

// agentRun writes an agent run named agent in one of the conventions' shapes.
func (g *randomTree) agentRun(parent pcommon.SpanID, agent string) ptrace.Span {
	switch g.r.IntN(4) {
	case 0:
		return g.span(parent, "invoke_agent "+agent, genai.AttrOperationName, genai.OpInvokeAgent, genai.AttrAgentName, agent)
	case 1:
		return g.span(parent, "invoke_agent "+agent) // semconv name only
	case 2:
		return g.span(parent, agent, genai.AttrOpenInferenceSpanKind, "AGENT", genai.AttrOIAgentName, agent)
	default:
		return g.span(parent, "ai.streamText", genai.AttrAIOperationID, "ai.streamText", genai.AttrAIFunctionID, agent)
	}
}

func (g *randomTree) tool(parent pcommon.SpanID, name string) ptrace.Span {
	switch g.r.IntN(3) {
	case 0:
		return g.span(parent, "execute_tool "+name, genai.AttrOperationName, genai.OpExecuteTool, genai.AttrToolName, name)
	case 1:
		return g.span(parent, name, genai.AttrOpenInferenceSpanKind, "TOOL", genai.AttrToolName, name)
	default:
		return g.span(parent, "ai.toolCall", genai.AttrAIOperationID, genai.AIOperationToolCall, genai.AttrToolName, name)
	}
}

func (g *randomTree) modelCall(parent pcommon.SpanID, want string) {
	var sp ptrace.Span
	switch g.r.IntN(3) {
	case 0:
		sp = g.span(parent, "chat gpt-4o", genai.AttrOperationName, genai.OpChat)
	case 1:
		sp = g.span(parent, "OpenAI Chat Completions", genai.AttrOpenInferenceSpanKind, "LLM")
	default:
		sp = g.span(parent, "ai.generateText.doGenerate", genai.AttrAIOperationID, "ai.generateText.doGenerate")
	}
	genai.PutUsage(sp.Attributes(), genai.Usage{Input: 10, Output: 1})
	if g.r.IntN(6) == 0 { // the emitter said who made it: that always wins
		want = genai.MiddlewareCaller("title")
		sp.Attributes().PutStr(genai.AttrCaller, want)
	}
	g.want[sp.SpanID()] = want
}

// run fills an agent run's body; caller is what its model calls must get.
func (g *randomTree) run(self pcommon.SpanID, caller string, depth int) {
	for range 1 + g.r.IntN(4) {
		k := g.r.IntN(10)
		if depth >= 4 || g.next > 150 { // keep traces small: calls and leaves only
			k %= 6
		}
		switch {
		case k < 4:
			g.modelCall(self, caller)
		case k < 5:
			// a tool that calls a model itself, no agent run in between: still this run's
			g.modelCall(g.tool(self, "summarize").SpanID(), caller)
		case k < 6:
			g.tool(self, "web_search")
		case k < 8:
			name := fmt.Sprintf("agent%d", g.next)
			tool := g.tool(self, genai.TaskToolName)
			parent := tool.SpanID()
			if g.r.IntN(2) == 0 { // a chain span between the tool and the run
				parent = g.span(parent, "RunnableSequence", genai.AttrOpenInferenceSpanKind, "CHAIN").SpanID()
			}
			g.run(g.agentRun(parent, name).SpanID(), genai.SubagentCaller(name), depth+1)
		case k < 9:
			// an inner agent run no tool dispatched belongs to the run around it
			g.run(g.agentRun(self, fmt.Sprintf("inner%d", g.next)).SpanID(), caller, depth+1)
		default:
			g.run(g.span(self, "RunnableLambda", genai.AttrOpenInferenceSpanKind, "CHAIN").SpanID(), caller, depth+1)
		}
	}
}

func TestAttributionOverRandomTrees(t *testing.T) {
	total, calls := 0, 0
	for seed := uint64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 14))
		g := &randomTree{r: r, ss: ptrace.NewSpanSlice(), want: map[pcommon.SpanID]string{}}
		lead := g.agentRun(pcommon.SpanID{}, genai.LeadAgentName)
		g.run(lead.SpanID(), "", 0)

		spans := make([]ptrace.Span, g.ss.Len())
		for i := range spans {
			spans[i] = g.ss.At(i)
		}
		r.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })

		res := Apply(spans)
		attributed := 0
		for _, sp := range spans {
			want, isCall := g.want[sp.SpanID()]
			if !isCall {
				_, has := sp.Attributes().Get(genai.AttrCaller)
				assert.False(t, has, "seed %d: span %s is no model call and gets no caller", seed, sp.Name())
				continue
			}
			got := ""
			if v, ok := sp.Attributes().Get(genai.AttrCaller); ok {
				got = v.Str()
			}
			require.Equal(t, want, got, "seed %d: caller of %s", seed, sp.Name())
			if got != "" && got != genai.MiddlewareCaller("title") {
				attributed++
			}
		}
		assert.Equal(t, attributed, res.Attributed, "seed %d", seed)
		total, calls = total+attributed, calls+len(g.want)

		// a second pass changes no caller
		before := make([]map[string]any, len(spans))
		for i, sp := range spans {
			before[i] = sp.Attributes().AsRaw()
		}
		assert.Equal(t, 0, Apply(spans).Attributed, "seed %d", seed)
		for i, sp := range spans {
			assert.Equal(t, before[i], sp.Attributes().AsRaw(), "seed %d", seed)
		}
	}
	// the trees exercise both outcomes, not only one
	t.Logf("%d model calls, %d attributed to a subagent", calls, total)
	assert.Greater(t, total, calls/5)
	assert.Less(t, total, calls*4/5)
}

// An unnamed subagent run is named after the tool that dispatched it.
func TestAttributionNamesAnUnnamedRunAfterItsTool(t *testing.T) {
	ss := ptrace.NewSpanSlice()
	newSpan(ss, 1, 0, genai.OpInvokeAgent)
	tool := newSpan(ss, 2, 1, genai.OpExecuteTool)
	tool.Attributes().PutStr(genai.AttrToolName, "research")
	newSpan(ss, 3, 2, genai.OpInvokeAgent) // bare "invoke_agent": no name
	c := newSpan(ss, 4, 3, genai.OpChat)
	Apply([]ptrace.Span{ss.At(0), ss.At(1), ss.At(2), ss.At(3)})
	v, _ := c.Attributes().Get(genai.AttrCaller)
	assert.Equal(t, "subagent:research", v.AsString())
}

// Without the dispatching tool in the trace, nothing says the run is a subagent's.
func TestAttributionNeedsTheTool(t *testing.T) {
	ss := ptrace.NewSpanSlice()
	newSpan(ss, 1, 9, genai.OpInvokeAgent) // parent 9 never arrived
	newSpan(ss, 3, 0, genai.OpExecuteTool)
	c := newSpan(ss, 2, 1, genai.OpChat)
	Apply([]ptrace.Span{ss.At(0), ss.At(1), ss.At(2)})
	_, has := c.Attributes().Get(genai.AttrCaller)
	assert.False(t, has)
}
