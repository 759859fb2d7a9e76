// Package goldentest compares the spans a face built with its golden file
// (testdata/<case>.expected.yaml, written by pkg/golden) through ptracetest, the way
// the collector's own components test: attribute and resource order do not matter,
// every value does. Run `go test ./receiver/agentusage/... -update` to rewrite the
// files after an intended change, and review the diff.
package goldentest

import (
	"flag"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

var update = flag.Bool("update", false, "rewrite the expected.yaml golden files")

// Compare checks td against the golden file at path.
func Compare(t *testing.T, path string, td ptrace.Traces) {
	t.Helper()
	if *update {
		if err := golden.WriteTracesToFile(path, td); err != nil {
			t.Fatalf("write golden: %v", err)
		}
		return
	}
	want, err := golden.ReadTraces(path)
	if err != nil {
		t.Fatalf("read golden %s (run with -update to create it): %v", path, err)
	}
	if err := ptracetest.CompareTraces(want, td, ptracetest.IgnoreResourceSpansOrder()); err != nil {
		t.Errorf("spans differ from %s (run with -update to accept): %v", path, err)
	}
}

// Merge appends every resource of src to dst.
func Merge(dst, src ptrace.Traces) {
	src.ResourceSpans().MoveAndAppendTo(dst.ResourceSpans())
}
