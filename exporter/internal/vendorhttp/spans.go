package vendorhttp

import "go.opentelemetry.io/collector/pdata/ptrace"

// SpanRef locates one span in a ptrace.Traces by its resource, scope and span index.
type SpanRef struct{ Resource, Scope, Span int }

// SpanRefs lists every span of td in order.
func SpanRefs(td ptrace.Traces) []SpanRef {
	refs := make([]SpanRef, 0, td.SpanCount())
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			for k := 0; k < sss.At(j).Spans().Len(); k++ {
				refs = append(refs, SpanRef{Resource: i, Scope: j, Span: k})
			}
		}
	}
	return refs
}

// Subset copies the referenced spans, in the order given, with their resource and scope,
// into new traces; spans of one resource (scope) share one copy of it.
func Subset(td ptrace.Traces, refs []SpanRef) ptrace.Traces {
	out := ptrace.NewTraces()
	type scopeKey struct{ r, s int }
	resources := map[int]ptrace.ResourceSpans{}
	scopes := map[scopeKey]ptrace.ScopeSpans{}
	for _, ref := range refs {
		srcRS := td.ResourceSpans().At(ref.Resource)
		rs, ok := resources[ref.Resource]
		if !ok {
			rs = out.ResourceSpans().AppendEmpty()
			srcRS.Resource().CopyTo(rs.Resource())
			rs.SetSchemaUrl(srcRS.SchemaUrl())
			resources[ref.Resource] = rs
		}
		key := scopeKey{ref.Resource, ref.Scope}
		srcSS := srcRS.ScopeSpans().At(ref.Scope)
		ss, ok := scopes[key]
		if !ok {
			ss = rs.ScopeSpans().AppendEmpty()
			srcSS.Scope().CopyTo(ss.Scope())
			ss.SetSchemaUrl(srcSS.SchemaUrl())
			scopes[key] = ss
		}
		srcSS.Spans().At(ref.Span).CopyTo(ss.Spans().AppendEmpty())
	}
	return out
}
