// Package goldentest compares built traces with golden files (ptrace JSON, indented)
// for the decoder tests; run `go test ./receiver/agentusage/... -update` to rewrite
// them after an intended change, and review the diff.
package goldentest

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Compare checks td against the golden file at path.
func Compare(t *testing.T, path string, td ptrace.Traces) {
	t.Helper()
	raw, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatalf("marshal traces: %v", err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", " "); err != nil {
		t.Fatalf("indent: %v", err)
	}
	buf.WriteByte('\n')
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatalf("write golden: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden %s (run with -update to create it): %v", path, err)
	}
	if !bytes.Equal(want, buf.Bytes()) {
		t.Errorf("traces differ from %s (run with -update to accept); got:\n%s", path, buf.String())
	}
}

// Merge appends every resource of src to dst.
func Merge(dst, src ptrace.Traces) {
	src.ResourceSpans().MoveAndAppendTo(dst.ResourceSpans())
}
