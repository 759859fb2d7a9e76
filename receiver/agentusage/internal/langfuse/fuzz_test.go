package langfuse

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// FuzzDecodeIngestion: any legacy batch decodes or is refused; reassembly never panics.
func FuzzDecodeIngestion(f *testing.F) {
	for i := 1; i <= 3; i++ {
		seed, _ := os.ReadFile(filepath.Join("testdata", "ingestion_sdk_"+string(rune('0'+i))+".json"))
		f.Add(seed)
	}
	f.Add([]byte(`{"batch":[{"id":"x","type":"observation-update","body":{"id":"o","type":"GENERATION","usageDetails":{"prompt_tokens":"1e400"},"output":[[[[]]]]}}]}`))
	f.Add([]byte(`{"batch":[{"id":"x","type":"event-create","body":{"id":"o","startTime":1e30,"usage":{"unit":"TOKENS","input":-5}}}]}`))
	f.Add([]byte(`{"batch":[{"id":"x","type":"tool-create","body":{"id":"o","traceId":"t","metadata":{"tool_call_id":7,"response_tool_call_ids":["a",1]},"output":{"tool_call_id":"call_1"},"tags":["lead_agent"]}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		events, _, err := DecodeIngestion(body)
		if err != nil {
			return
		}
		in := NewIngester(time.Minute, 10)
		p := in.Plan(events)
		p.Build()
		held := append(append([]Observation(nil), p.Park...), p.Roots...)
		p.Commit(t0)
		in.BuildObservations(in.Drain())
		// what a restart reads back from storage builds too
		var restored []Observation
		for _, o := range held {
			b, err := json.Marshal(o)
			if err != nil {
				t.Fatalf("a held observation does not encode: %v", err)
			}
			var back Observation
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("a stored observation does not decode: %v", err)
			}
			restored = append(restored, back)
		}
		again := NewIngester(time.Minute, 10)
		again.Restore(restored, t0)
		again.BuildObservations(again.Drain())
	})
}

// FuzzDecodeOTLP: protobuf and JSON bodies decode or are refused; mapping never panics.
func FuzzDecodeOTLP(f *testing.F) {
	seed, _ := os.ReadFile(filepath.Join("testdata", "otlp_sdk.json"))
	f.Add(seed, true)
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalJSON(seed); err == nil {
		if pb, err := req.MarshalProto(); err == nil {
			f.Add(pb, false)
		}
	}
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","parentSpanId":"0102030405060708","attributes":[{"key":"langfuse.observation.type","value":{"stringValue":"agent"}},{"key":"langfuse.observation.usage_details","value":{"intValue":"3"}}]}]}]}]}`), true)
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool) {
		ct := "application/x-protobuf"
		if isJSON {
			ct = "application/json"
		}
		_, _ = DecodeOTLP(ct, body)
	})
}

// FuzzUsageDetailsFastPath: whenever the flat walk reads a usage_details object itself,
// it reads what decoding the object whole reads.
func FuzzUsageDetailsFastPath(f *testing.F) {
	for _, s := range []string{`{"input":70,"input_cached_tokens":30,"output":15,"output_reasoning_tokens":5,"total":120}`,
		` { "input" : 1 , "cache_creation_input_tokens":2 } `, `{"input":1,"input":2}`, `{"in\u0070ut":3}`, `{}`, `{"input":1e2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u, ok, flat := flatCounts(b)
		if !flat {
			return
		}
		d, valid := rawjson.Parse(b)
		if !valid {
			t.Fatalf("%q: the flat walk read what is not JSON", b)
		}
		ud, _ := rawjson.Value(d.Root()).(map[string]any)
		wu, wok := usageFromDetails(ud)
		if u != wu || ok != wok {
			t.Fatalf("%q: flat %v %v, whole %v %v", b, u, ok, wu, wok)
		}
	})
}
