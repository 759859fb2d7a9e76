package subagentmerge

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// agentGen builds random agent runs and remembers, for every dispatching chat span, the
// usage docs/contract.md#merge says it must carry: computed here from the tree as it is built,
// independently of the processor.
type agentGen struct {
	r    *rand.Rand
	b    *traceBuilder
	want map[pcommon.SpanID]genai.Usage
	call int
	// finish writes gen_ai.response.finish_reasons on model calls, as the agentmeter
	// runtime does ("tool_calls" when the response asked for tools, else "stop"); without
	// it the run is one of an emitter that announces only tool-call ids.
	finish bool
}

// chat adds a model call the way the generator's emitter writes it.
func (g *agentGen) chat(parent pcommon.SpanID, u *genai.Usage, calls ...string) ptrace.Span {
	sp := g.b.chat(parent, u, calls...)
	if g.finish {
		reason := "stop"
		if len(calls) > 0 {
			reason = "tool_calls"
		}
		genai.PutStrings(sp.Attributes(), genai.AttrFinishReasons, []string{reason})
	}
	return sp
}

func randomUsage(r *rand.Rand) *genai.Usage {
	if r.IntN(10) == 0 {
		return nil // a call that reported no usage
	}
	u := &genai.Usage{Input: r.Int64N(5000), Output: r.Int64N(800)}
	if r.IntN(3) == 0 {
		u.CacheRead = r.Int64N(u.Input + 1)
	}
	if r.IntN(4) == 0 {
		u.CacheCreation = r.Int64N(u.Input - u.CacheRead + 1)
	}
	if r.IntN(3) == 0 {
		u.Reasoning = r.Int64N(u.Output + 1)
	}
	return u
}

// runAgent adds an agent's loop under the invoke_agent span id and returns the own usage
// of every model call under it, nested subagents included.
func (g *agentGen) runAgent(agent pcommon.SpanID, depth int) genai.Usage {
	var total genai.Usage
	steps := 1 + g.r.IntN(3)
	for range steps {
		var calls []string
		kinds := g.r.IntN(4) // tool calls in this response
		isTask := make([]bool, kinds)
		for i := range kinds {
			g.call++
			calls = append(calls, fmt.Sprintf("call_%d", g.call))
			isTask[i] = depth < 2 && g.r.IntN(2) == 0
		}
		u := randomUsage(g.r)
		chat := g.chat(agent, u, calls...)
		if u != nil {
			total = total.Add(*u)
		}
		var merged genai.Usage
		dispatched := false
		for i, id := range calls {
			if !isTask[i] {
				g.b.tool(agent, "web_search", id)
				continue
			}
			status := []string{genai.SubagentCompleted, genai.SubagentFailed, genai.SubagentTimedOut}[g.r.IntN(3)]
			_, sub := g.b.task(agent, id, "sub", status)
			subUsage := g.runAgent(sub, depth+1)
			merged = merged.Add(subUsage)
			total = total.Add(subUsage)
			dispatched = true
		}
		if dispatched {
			g.want[chat.SpanID()] = merged
		}
	}
	u := randomUsage(g.r)
	g.chat(agent, u)
	if u != nil {
		total = total.Add(*u)
	}
	return total
}

// randomAgentTrace returns one random run as the agentmeter runtime writes it (finish
// reasons on every model call), spans in start order.
func randomAgentTrace(r *rand.Rand, traceNo uint64) ptrace.Traces {
	td, _ := randomAgentTraceWithWant(r, traceNo, true)
	return td
}

func randomAgentTraceWithWant(r *rand.Rand, traceNo uint64, finish bool) (ptrace.Traces, map[pcommon.SpanID]genai.Usage) {
	g := &agentGen{r: r, b: newTraceBuilder(traceNo), want: map[pcommon.SpanID]genai.Usage{}, finish: finish}
	lead := g.b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	g.runAgent(lead, 0)
	return g.b.td, g.want
}

// For random agent trees: the sum of own usage out equals the sum in, and every
// dispatching span's agentmeter.subagent.* equals the own usage under its task calls.
func TestPropertyRandomAgentTrees(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 99))
		in, want := randomAgentTraceWithWant(r, seed, seed%3 != 0)
		batches := shuffleIntoBatches(r, in, 1+r.IntN(6))
		out := run(t, bufferModes[seed%uint64(len(bufferModes))].cfg(), batches...)
		require.Equal(t, in.SpanCount(), out.SpanCount(), "seed %d", seed)
		require.Equal(t, ownUsageSum(in), ownUsageSum(out), "seed %d: own usage changed", seed)
		for sp := range spaniter.All(out) {
			got, has := genai.SubagentUsageFromMap(sp.Attributes())
			w, dispatcher := want[sp.SpanID()]
			require.Equal(t, dispatcher, has, "seed %d span %s", seed, sp.SpanID())
			if dispatcher {
				assert.Equal(t, w, got, "seed %d span %s", seed, sp.SpanID())
			}
			if genai.SpanOperation(sp.Name(), sp.Attributes()) == genai.OpExecuteTool {
				if name, _ := sp.Attributes().Get(genai.AttrToolName); name.Str() == genai.TaskToolName {
					st, _ := sp.Attributes().Get(genai.AttrMergeStatus)
					assert.Equal(t, genai.MergeMerged, st.Str(), "seed %d", seed)
				}
			}
		}
	}
}
