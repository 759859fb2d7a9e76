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
