package native

import (
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// FuzzDecode: any body either decodes (good records become spans, bad ones errors) or
// is refused with ErrBody; it never panics, and every accepted record is one chat span.
func FuzzDecode(f *testing.F) {
	seed, _ := os.ReadFile(filepath.Join("testdata", "records.json"))
	f.Add(seed)
	f.Add([]byte(`[{"run_id":"r","source_run_id":"s","input_tokens":1e30}]`))
	f.Add([]byte(`{"run_id":"r","source_run_id":"s","start_time":-1,"end_time":"2026-13-45T99:99:99Z"}`))
	f.Add([]byte(`{"records":[null,{},[],"x"]}`))
	f.Add([]byte(`[{"run_id":"r","source_run_id":"s","response_tool_call_ids":null,"tool_call_id":""}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := Decode(body, fixedNow)
		if err != nil {
			return
		}
		chats := 0
		rss := res.Traces.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			spans := rss.At(i).ScopeSpans().At(0).Spans()
			for j := 0; j < spans.Len(); j++ {
				if spans.At(j).Kind() == ptrace.SpanKindClient { // one per record
					chats++
				}
			}
		}
		if chats != res.Accepted {
			t.Fatalf("accepted %d records but built %d chat spans", res.Accepted, chats)
		}
	})
}
