package genai

import "go.opentelemetry.io/collector/pdata/pcommon"

// MergeRevision is a span's agentmeter.merge.revision: 0 for a first emission (no
// attribute, or one that is not a positive integer), else the re-emission's number.
func MergeRevision(attrs pcommon.Map) int64 {
	v, ok := attrs.Get(AttrMergeRevision)
	if !ok {
		return 0
	}
	return MergeRevisionValue(v)
}

// MergeRevisionValue is MergeRevision for the attribute's value, for readers that walk
// the attributes once.
func MergeRevisionValue(v pcommon.Value) int64 {
	var n int64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		n = v.Int()
	case pcommon.ValueTypeDouble:
		n = int64(v.Double())
	}
	return max(n, 0)
}

// IsReemission is the one rule for "this span was sent before under the same span id":
// it carries a merge revision ≥1, or is a dispatching model call marked corrected. Sinks
// that upsert replace what they hold for the span; sinks that count (the token metrics)
// skip it, since its own usage was counted with the first emission.
func IsReemission(attrs pcommon.Map) bool {
	if MergeRevision(attrs) >= 1 {
		return true
	}
	v, ok := attrs.Get(AttrMergeStatus)
	return ok && v.Type() == pcommon.ValueTypeStr && v.Str() == MergeCorrected
}

// IsCountedVersion reports whether counters count this version of a span: a first
// emission, unless its caller is pending (AttrCallerPending), and the one re-emission
// that settles a pending caller (AttrCallerSettled). Every model call is counted by
// exactly one of its versions.
func IsCountedVersion(attrs pcommon.Map) bool {
	if boolAttr(attrs, AttrCallerSettled) {
		return true
	}
	return !IsReemission(attrs) && !boolAttr(attrs, AttrCallerPending)
}

func boolAttr(attrs pcommon.Map, key string) bool {
	v, ok := attrs.Get(key)
	return ok && v.Type() == pcommon.ValueTypeBool && v.Bool()
}
