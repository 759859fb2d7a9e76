package genai

import "go.opentelemetry.io/collector/pdata/pcommon"

// IsReemission reports whether a span is a later version of one already passed on
// (agentmeter.merge.revision, or a dispatching span marked "corrected"): sinks that
// upsert replace the earlier version with it, and counters never count it again.
func IsReemission(attrs pcommon.Map) bool {
	if v, ok := attrs.Get(AttrMergeRevision); ok && v.Type() == pcommon.ValueTypeInt && v.Int() >= 1 {
		return true
	}
	v, ok := attrs.Get(AttrMergeStatus)
	return ok && v.Type() == pcommon.ValueTypeStr && v.Str() == MergeCorrected
}
