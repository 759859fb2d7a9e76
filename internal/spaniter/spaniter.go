// Package spaniter yields the spans of pdata traces: the resource, scope and span walk
// that every reader of a ptrace.Traces needs, written once.
package spaniter

import (
	"iter"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// All yields every span of td, in resource, scope and span order. The spans are td's
// own (not copies): a change to one changes td.
func All(td ptrace.Traces) iter.Seq[ptrace.Span] {
	return func(yield func(ptrace.Span) bool) {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					if !yield(spans.At(k)) {
						return
					}
				}
			}
		}
	}
}

// In yields every span of every batch in tds, batch by batch in the order of All.
func In(tds []ptrace.Traces) iter.Seq[ptrace.Span] {
	return func(yield func(ptrace.Span) bool) {
		for _, td := range tds {
			for sp := range All(td) {
				if !yield(sp) {
					return
				}
			}
		}
	}
}

// RemoveIf removes from td every span remove says so of, visiting them in the order of
// All, and then the scopes and resources left without spans.
func RemoveIf(td ptrace.Traces, remove func(ptrace.Span) bool) {
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(remove)
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
}
