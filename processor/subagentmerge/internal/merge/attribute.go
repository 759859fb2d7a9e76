package merge

import "github.com/agentmeter/agentmeter/genai"

// attribute sets agentmeter.caller = "subagent:<agent>" on every model call that runs
// inside a subagent's run and has no caller: the trace's shape says who made the call
// when the emitter did not. A subagent's run is an agent run (genai.AgentRunName: an
// invoke_agent span, or a span a foreign convention marks as an agent run) with a tool
// span (genai.IsToolCallSpan) between it and the next agent run above it, the tool that
// dispatched it. A call belongs to the innermost such run above it, so a nested
// subagent's calls are its own and not its dispatcher's; agent runs that no tool
// dispatched (a graph's inner agent) belong to the run around them. Calls outside any
// dispatched run are the lead's and stay without a caller (the lead bucket). An explicit
// agentmeter.caller always wins, so a second pass changes nothing.
//
// It needs the whole trace (every ancestor), so it runs when a trace is released; the
// parent links in nodes must be set. It writes the callers into out and returns how many
// calls it attributed.
func attribute(nodes []node, out []Outcome) int {
	n := 0
	for i := range nodes {
		c := &nodes[i]
		if !c.model || c.f.Caller != "" {
			continue
		}
		if name, run := dispatchedRun(nodes, c.parent); run >= 0 {
			r := &nodes[run]
			if r.caller == "" { // one string per subagent run, not per call
				r.caller = genai.SubagentCaller(name)
			}
			out[i].Caller = r.caller
			n++
		}
	}
	return n
}

// dispatchedRun walks up from index j and returns the agent and index of the innermost
// agent run that a tool dispatched, or index -1. The walk is bounded by the span count,
// which also stops it on malformed parent links that form a cycle.
func dispatchedRun(nodes []node, j int32) (string, int32) {
	pending, run := "", int32(-1) // the outermost agent run seen since the last tool
	for steps := 0; j >= 0 && steps < len(nodes); j, steps = nodes[j].parent, steps+1 {
		a := &nodes[j]
		switch {
		case a.agentRun:
			pending, run = a.f.Agent, j
			if pending == "" {
				pending = toolNameAbove(nodes, a.parent)
			}
		case a.tool && run >= 0:
			return pending, run
		}
	}
	return "", -1
}

// toolNameAbove names an unnamed agent run after the tool that dispatched it, if any.
func toolNameAbove(nodes []node, j int32) string {
	for steps := 0; j >= 0 && steps < len(nodes); j, steps = nodes[j].parent, steps+1 {
		switch a := &nodes[j]; {
		case a.tool:
			return a.f.ToolName
		case a.agentRun:
			return ""
		}
	}
	return ""
}
