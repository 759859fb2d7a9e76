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
func (p *subagentMerge) effectOf(sc *scratch, g *group, l *ledger, below *modelsBelow) int {
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
			if l.spans.dispatchesUsage(h, below) {
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
func (s *spanSet) dispatchesUsage(h uint32, below *modelsBelow) bool {
	for i := range s.keys {
		if k := s.keys[i]; k.kind&kindTool != 0 && k.call == h && s.toolStatus(i, below) != "" {
			return true
		}
	}
	return false
}

// toolStatus is what the merge writes on execute_tool span keys[i] given the spans
// present: "" while no model call is under it, "merged" once some model call also
// asked for its tool call (its dispatcher), else "orphan" (internal/merge decides the
// same way). below is of the set as it is now.
func (s *spanSet) toolStatus(i int, below *modelsBelow) string {
	if !below.has(i) {
		return ""
	}
	if t := s.keys[i]; t.call != 0 {
		for _, a := range s.asks {
			if a == t.call {
				return genai.MergeMerged
			}
		}
	}
	return genai.MergeOrphan
}

// modelsBelow tells, for one state of a spanSet, which of its spans have a model call
// under them (through the spans present). It walks up once from every model call, each
// walk stopping at a span an earlier one marked, so it is linear in the spans; asking
// span by span would walk every model call's ancestry for each tool span. Built on first
// use: the set must not change while one is in use.
type modelsBelow struct {
	s     *spanSet
	marks []bool
}

func (m *modelsBelow) has(i int) bool {
	if m.marks == nil {
		s := m.s
		m.marks = make([]bool, len(s.keys))
		for j := range s.keys {
			if s.keys[j].kind&kindModel == 0 {
				continue
			}
			// a walk stops at a local root, a missing parent or a span already marked
			// (whose ancestors an earlier walk marked; this also ends a cycle)
			for k := s.keys[j]; !k.root(); {
				p := s.find(k.parent)
				if p < 0 || m.marks[p] {
					break
				}
				m.marks[p] = true
				k = s.keys[p]
			}
		}
	}
	return m.marks[i]
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
