package subagentmerge

// Stream mode: what a batch's new spans change in what the merge writes, read off the
// span keys so that most batches need no merge run.

import (
	"github.com/agentmeter/agentmeter/genai"
)

// What a group's new spans do to what the merge writes on their trace.
const (
	effectNone   = iota // nothing: no subtree sum, dispatcher, status or caller changes
	effectLater         // dispatchers or kept spans change: re-emitted in the settle window
	effectInline        // a new span's own merge results need a merge run now
)

// effectOf tells what the group's new spans change. A span changes nothing when it is
// not a tool span, not a model call that asked for a tool call already in the trace,
// and has no tool span above it (walking up through the spans present): then no
// subtree sum, dispatcher or attribution above it changes, and below it everything was
// decided by what was there already. Spans exported as they end (children before
// parents) mostly are such: a subagent's steps come before the tool span that
// dispatched it. A tool span (execute_tool) changes its dispatcher later; its own
// status is read off the keys (toolStatus). A model call under a tool span, or one
// whose asked tool spans are there with model calls under them, needs the merge now,
// for its own caller or merged usage.
func (p *subagentMerge) effectOf(sc *scratch, g *group, l *ledger) int {
	eff := effectNone
	for r := g.first; r >= 0; r = sc.refs[r].next {
		ref := &sc.refs[r]
		if ref.fate == fateDrop {
			continue
		}
		k := ref.key
		model := k.kind&kindModel != 0
		switch {
		case k.kind&kindTool != 0:
			eff = max(eff, effectLater)
			continue
		case k.role == genai.SpanToolCall:
			return effectInline // a tool span of another convention: the merge decides
		}
		for _, h := range sc.asks[ref.asks[0]:ref.asks[1]] {
			if l.spans.dispatchesUsage(h) {
				return effectInline
			}
		}
		for steps := 0; !k.root() && steps <= len(l.spans.keys); steps++ {
			i := l.spans.find(k.parent)
			if i < 0 {
				break
			}
			k = l.spans.keys[i]
			if k.kind&kindTool != 0 {
				if model && !namesCaller(ref) {
					return effectInline // the merge gives it its caller from the shape
				}
				eff = max(eff, effectLater)
				break
			}
		}
	}
	return eff
}

// namesCaller reports whether a model call carries its own agentmeter.caller, which the
// merge never replaces (internal/merge attribute.go).
func namesCaller(ref *ref) bool {
	v, ok := ref.span.Attributes().Get(genai.AttrCaller)
	return ok && v.AsString() != ""
}

// dispatchesUsage reports whether a tool span of call h is present with a model call
// under it: what a model call asking for h would get merged onto it.
func (s *spanSet) dispatchesUsage(h uint32) bool {
	for i := range s.keys {
		if k := s.keys[i]; k.kind&kindTool != 0 && k.call == h && s.toolStatus(k) != "" {
			return true
		}
	}
	return false
}

// toolStatus is what the merge writes on execute_tool span t given the spans present:
// "" while no model call is under it, "merged" once some model call also asked for its
// tool call (its dispatcher), else "orphan" (internal/merge decides the same way).
func (s *spanSet) toolStatus(t spanKey) string {
	has := false
	for i := range s.keys {
		if s.keys[i].kind&kindModel == 0 {
			continue
		}
		k := s.keys[i]
		for steps := 0; !k.root() && steps <= len(s.keys); steps++ {
			j := s.find(k.parent)
			if j < 0 {
				break
			}
			if s.keys[j].id == t.id {
				has = true
				break
			}
			k = s.keys[j]
		}
		if has {
			break
		}
	}
	if !has {
		return ""
	}
	if t.call != 0 {
		for _, a := range s.asks {
			if a == t.call {
				return genai.MergeMerged
			}
		}
	}
	return genai.MergeOrphan
}

// mayChange reports whether what the merge writes on ref's span can still change as
// more of its trace arrives: a model call that asked for tool calls (its subagents'
// usage may still come), a model call whose caller is unsettled (no caller of its own,
// an ancestor missing), or a tool span that went out without being merged (its
// dispatcher or subtree may still come).
func mayChange(ref *ref, unsettled bool) bool {
	if ref.key.kind&kindModel != 0 {
		return ref.asks[1] > ref.asks[0] || unsettled
	}
	if ref.key.kind&kindTool == 0 && ref.key.role != genai.SpanToolCall {
		return false
	}
	return mergeStatus(ref.span.Attributes()) != genai.MergeMerged
}

// rooted reports whether every ancestor of k, up to a local root, is in the set.
func (s *spanSet) rooted(k spanKey) bool {
	for steps := 0; steps <= len(s.keys); steps++ {
		if k.root() {
			return true
		}
		i := s.find(k.parent)
		if i < 0 {
			return false
		}
		k = s.keys[i]
	}
	return false // a cycle of parent links
}
