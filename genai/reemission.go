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
// that upsert by span id take it as the newer version; counters skip it.
func IsReemission(attrs pcommon.Map) bool { return ReemissionOf(attrs).Reemission() }

// ReemissionOf reads the two facts the re-emission rule needs (revision and merge
// status), for readers on every span an exporter sends; the counting facts are left
// unread.
func ReemissionOf(attrs pcommon.Map) Version {
	return versionOf(attrs, AttrMergeRevision, AttrMergeStatus)
}

// IsCountedVersion reports whether counters count this version of a span: a first
// emission, unless its caller is pending (AttrCallerPending), and the one re-emission
// that settles a pending caller (AttrCallerSettled). Every model call is counted by
// exactly one of its versions.
func IsCountedVersion(attrs pcommon.Map) bool { return VersionOf(attrs).Counted() }

// versionKeys are the attributes Version reads.
var versionKeys = [...]string{AttrMergeRevision, AttrMergeStatus, AttrCallerPending, AttrCallerSettled}

// Version is what the re-emission and counting rules read of a span. Readers that walk
// a span's attributes once fill it with Offer; others use VersionOf.
type Version struct {
	Revision  int64 // MergeRevision
	Corrected bool  // agentmeter.merge.status is "corrected"
	Pending   bool  // AttrCallerPending
	Settled   bool  // AttrCallerSettled
	seen      uint8 // keys offered so far: the first of a repeated key wins, as Map.Get reads
}

const (
	seenRevision = 1 << iota
	seenStatus
	seenPending
	seenSettled
)

// VersionOf reads a span's version facts.
func VersionOf(attrs pcommon.Map) Version { return versionOf(attrs, versionKeys[:]...) }

// versionOf reads only keys.
func versionOf(attrs pcommon.Map, keys ...string) Version {
	var v Version
	for _, k := range keys {
		if val, ok := attrs.Get(k); ok {
			v.Offer(k, val)
		}
	}
	return v
}

// Offer takes one attribute; it reports whether the key is one Version reads.
func (f *Version) Offer(k string, v pcommon.Value) bool {
	var bit uint8
	switch k {
	case AttrMergeRevision:
		bit = seenRevision
	case AttrMergeStatus:
		bit = seenStatus
	case AttrCallerPending:
		bit = seenPending
	case AttrCallerSettled:
		bit = seenSettled
	default:
		return false
	}
	if f.seen&bit != 0 {
		return true
	}
	f.seen |= bit
	switch bit {
	case seenRevision:
		f.Revision = MergeRevisionValue(v)
	case seenStatus:
		f.Corrected = v.Type() == pcommon.ValueTypeStr && v.Str() == MergeCorrected
	case seenPending:
		f.Pending = v.Type() == pcommon.ValueTypeBool && v.Bool()
	case seenSettled:
		f.Settled = v.Type() == pcommon.ValueTypeBool && v.Bool()
	}
	return true
}

// Rank orders the versions of a span: its revision, and 1 for a dispatching model call
// marked corrected without one.
func (f Version) Rank() int64 {
	if f.Revision == 0 && f.Corrected {
		return 1
	}
	return f.Revision
}

// Reemission is IsReemission's rule: any version after the first.
func (f Version) Reemission() bool { return f.Rank() >= 1 }

// Counted is IsCountedVersion's rule.
func (f Version) Counted() bool { return f.Settled || (!f.Reemission() && !f.Pending) }
