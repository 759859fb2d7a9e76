package langsmith

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A run carries its dotted_order as the span's LangSmith placement only when the
// dotted_order addresses that run: its last id is the run's, the one before it the
// parent the run names, the first the trace it names. Anything else (none, malformed,
// another run's) places nothing: the run goes to LangSmith once its trace is complete.
func TestPlacementOnlyWhenTheDottedOrderAddressesTheRun(t *testing.T) {
	const (
		root  = "01a22a3b-f730-7000-8000-02cb7f990012"
		child = "01a22a3b-f7d0-7000-8000-03f68f2abfe6"
		other = "01a22a3b-f7d6-7000-8000-023d1523839a"
	)
	rootSeg, childSeg := "20261130T021502704001Z"+root, "20261130T021502864002Z"+child
	dotted := rootSeg + "." + childSeg
	for _, c := range []struct {
		name   string
		run    Run
		parent string
		want   string
	}{
		{"root", Run{ID: root, DottedOrder: rootSeg}, "", rootSeg},
		{"child", Run{ID: child, TraceID: root, DottedOrder: dotted}, root, dotted},
		{"child, ids in upper case", Run{ID: strings.ToUpper(child), DottedOrder: dotted}, strings.ToUpper(root), dotted},
		{"a dotted_order in upper case", Run{ID: child, DottedOrder: strings.ToUpper(dotted)}, root, dotted},
		{"none", Run{ID: child}, root, ""},
		{"malformed", Run{ID: child, DottedOrder: dotted[:len(dotted)-1]}, root, ""},
		{"another run's", Run{ID: other, DottedOrder: dotted}, root, ""},
		{"under another parent", Run{ID: child, DottedOrder: dotted}, other, ""},
		{"a root's under a parent", Run{ID: root, DottedOrder: rootSeg}, other, ""},
		{"in another trace", Run{ID: child, TraceID: other, DottedOrder: dotted}, root, ""},
	} {
		assert.Equal(t, c.want, placement(&c.run, c.parent), c.name)
	}
}
