package dottedorder

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIDs(t *testing.T) {
	tid := [16]byte{0x0e, 0x01, 0xbf, 0x50, 0x47, 0x4d, 0x45, 0x36, 0x81, 0x0f, 0x67, 0xd3, 0xee, 0x7e, 0xa3, 0xe7}
	assert.Equal(t, "0e01bf50-474d-4536-810f-67d3ee7ea3e7", TraceUUID(tid))
	assert.Equal(t, "00000000-0000-0000-0102-030405060708", SpanUUID([8]byte{1, 2, 3, 4, 5, 6, 7, 8}))
}

func TestSegmentHasSixDigitMicroseconds(t *testing.T) {
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2024, 9, 19, 17, 16, 48, 521691000, time.UTC), "20240919T171648521691Z"},
		{time.Date(2024, 9, 19, 17, 16, 48, 0, time.UTC), "20240919T171648000000Z"},
		{time.Date(2024, 9, 19, 17, 16, 48, 7999, time.UTC), "20240919T171648000007Z"}, // truncated, not rounded
		// a non-UTC input is rendered in UTC
		{time.Date(2024, 9, 19, 19, 16, 48, 1000, time.FixedZone("CEST", 7200)), "20240919T171648000001Z"},
	} {
		got := string(AppendSegment(nil, tc.at.UnixMicro(), "0e01bf50-474d-4536-810f-67d3ee7ea3e7"))
		assert.Equal(t, tc.want+"0e01bf50-474d-4536-810f-67d3ee7ea3e7", got)
	}
	assert.Equal(t, "2024-09-19T17:16:48.000007Z", FormatTime(time.Date(2024, 9, 19, 17, 16, 48, 7999, time.UTC).UnixMicro()))
}

func TestCivilMatchesTime(t *testing.T) {
	for _, us := range []int64{0, -1, 1, 951782400000000, 4102444799999999, -62135596800000000, 1709251200123456} {
		tm := time.UnixMicro(us).UTC()
		c := civilFromMicros(us)
		y, mo, d := tm.Date()
		assert.Equal(t, civil{y, int(mo), d, tm.Hour(), tm.Minute(), tm.Second(), tm.Nanosecond() / 1000}, c, "%d", us)
	}
	for us := int64(-5e15); us < 5e15; us += 7_777_777_777_777 {
		tm := time.UnixMicro(us).UTC()
		assert.Equal(t, tm.Format("2006-01-02T15:04:05.000000Z"), FormatTime(us))
	}
}

func TestParseReadsWhatIsWritten(t *testing.T) {
	trace := [16]byte{0x0e, 0x01, 0xbf, 0x50, 0x47, 0x4d, 0x45, 0x36, 0x81, 0x0f, 0x67, 0xd3, 0xee, 0x7e, 0xa3, 0xe7}
	root := "0e01bf50-474d-4536-810f-67d3ee7ea3e7"
	span := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	child := SpanUUID(span)
	for us := int64(-5e15); us < 5e15; us += 3_333_333_333_333 {
		top := Root(us, trace)
		segs, ok := Parse(top)
		require.True(t, ok, top)
		assert.Equal(t, []Segment{{us, root}}, segs)

		// a child that started before its parent is clamped to the parent's time
		d := Child(top, us-1, span)
		segs, ok = Parse(d)
		require.True(t, ok, d)
		assert.Equal(t, []Segment{{us, root}, {us, child}}, segs)
		last, ok := Last(d)
		require.True(t, ok)
		assert.Equal(t, Segment{us, child}, last)
		gotRoot, parent, gotLast, ok := Ends(d)
		require.True(t, ok)
		assert.Equal(t, [3]Segment{{us, root}, {us, root}, {us, child}}, [3]Segment{gotRoot, parent, gotLast})
		gotRoot, parent, gotLast, ok = Ends(top)
		require.True(t, ok)
		assert.Equal(t, [3]Segment{{us, root}, {}, {us, root}}, [3]Segment{gotRoot, parent, gotLast}, "a root has no parent")
		assert.Equal(t, []Segment{{us, root}, {us + 7, child}}, must(t, Child(top, us+7, span)))
	}
}

func must(t *testing.T, dotted string) []Segment {
	t.Helper()
	segs, ok := Parse(dotted)
	require.True(t, ok, dotted)
	return segs
}

func TestParseRefusesWhatLangSmithRefuses(t *testing.T) {
	good := "20240919T171648521691Z0e01bf50-474d-4536-810f-67d3ee7ea3e7"
	for _, bad := range []string{
		"",
		"20240919T171648521Z0e01bf50-474d-4536-810f-67d3ee7ea3e7",       // 3-digit fraction
		"20240919T171648521691000Z0e01bf50-474d-4536-810f-67d3ee7ea3e7", // 9-digit fraction
		"2024-09-19T17:16:48.521691Z0e01bf50-474d-4536-810f-67d3ee7ea3e7",
		"20241319T171648521691Z0e01bf50-474d-4536-810f-67d3ee7ea3e7", // month 13
		"20240231T171648521691Z0e01bf50-474d-4536-810f-67d3ee7ea3e7", // 31 February
		"20230229T171648521691Z0e01bf50-474d-4536-810f-67d3ee7ea3e7", // 29 February, not a leap year
		"00000919T171648521691Z0e01bf50-474d-4536-810f-67d3ee7ea3e7", // year 0
		"20240919T176048521691Z0e01bf50-474d-4536-810f-67d3ee7ea3e7", // minute 60
		"20240919T171648521691Z0e01bf50474d4536810f67d3ee7ea3e7xxxx", // no hyphens
		"20240919T171648521691Z0e01bf50-474d-4536-810f-67d3ee7ea3eg", // not hex
		good + ".",
		good + "." + good[:len(good)-1],
		good + ";" + good,
		strings.Repeat(good, 2),
	} {
		_, ok := Parse(bad)
		assert.False(t, ok, "%q", bad)
		assert.Equal(t, "", Child(bad, 0, [8]byte{1}), "%q", bad)
		_, _, _, ok = Ends(bad)
		assert.False(t, ok, "%q", bad)
	}
	_, ok := Last("x" + good)
	assert.False(t, ok)
	_, ok = Parse("20240229T171648521691Z0e01bf50-474d-4536-810f-67d3ee7ea3e7")
	assert.True(t, ok, "29 February of a leap year")
	segs, ok := Parse(good + "." + good)
	require.True(t, ok)
	assert.Len(t, segs, 2)
	assert.Equal(t, time.Date(2024, 9, 19, 17, 16, 48, 521691000, time.UTC).UnixMicro(), segs[0].Micros)
}

// Lower puts the run ids in lower case, as LangSmith writes them, and leaves the
// timestamps as they are.
func TestLower(t *testing.T) {
	const lower = "20261202T120000000001Z2f6a1c7e-0b6e-4d8e-9a51-3c1f0e7d2b90.20261202T120001000002Z7d9e4c0a-5b1f-4e2a-8c3d-6f0a1b2c3d4e"
	upper := lower[:SegmentLen+1] + "20261202T120001000002Z7D9E4C0A-5B1F-4E2A-8C3D-6F0A1B2C3D4E"
	if got := Lower(upper); got != lower {
		t.Fatalf("Lower = %q", got)
	}
	if got := Lower(lower); got != lower {
		t.Fatalf("Lower of a lower-case placement = %q", got)
	}
}
