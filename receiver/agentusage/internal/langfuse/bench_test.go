package langfuse

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// BenchmarkUsageDetailsJSON reads langfuse.observation.usage_details as the OTLP face
// does for every generation span: the flat object the SDKs send, from the attribute's
// string.
func BenchmarkUsageDetailsJSON(b *testing.B) {
	v := pcommon.NewValueStr(`{"input":1200,"input_cached_tokens":800,"output":150,"output_reasoning_tokens":40,"total":2190}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := usageFromDetailsJSON(v.AsString()); !ok {
			b.Fatal("no usage")
		}
	}
}
