package agentusage

import (
	"bytes"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/langfuse"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/langsmith"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/native"
)

// BenchmarkDecodeVsOTLP is the in-process half of the comparison: one goroutine turning
// a request body into pdata, per face, against the otlp receiver's own step
// (ExportRequest.UnmarshalProto of the equivalent spans). It is steadier than the HTTP
// benchmark on a loaded machine; ratio_vs_otlp is measured against the baseline run
// immediately before it.
func BenchmarkDecodeVsOTLP(b *testing.B) {
	ps := payloads(b)
	rate := func(b *testing.B) float64 {
		r := float64(b.N*recordsPerRequest) / b.Elapsed().Seconds()
		b.ReportMetric(r, "records/s")
		return r
	}
	otlp := func(body []byte, json bool) func(b *testing.B) float64 {
		return func(b *testing.B) float64 {
			b.ReportAllocs()
			for b.Loop() {
				req := ptraceotlp.NewExportRequest()
				var err error
				if json {
					err = req.UnmarshalJSON(body)
				} else {
					err = req.UnmarshalProto(body)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			return rate(b)
		}
	}
	faces := map[string]func(b *testing.B){
		"native": func(b *testing.B) {
			for b.Loop() {
				if _, err := native.Decode(ps["native"].body, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		},
		"langsmith_batch": func(b *testing.B) {
			tr := langsmith.NewTranslator(time.Minute, 10000)
			for b.Loop() {
				ops, _, err := langsmith.DecodeBatch(ps["langsmith_batch"].body)
				if err != nil {
					b.Fatal(err)
				}
				translateLangSmith(tr, ops)
			}
		},
		"langsmith_multipart": func(b *testing.B) {
			tr := langsmith.NewTranslator(time.Minute, 10000)
			for b.Loop() {
				body := ps["langsmith_multipart"].body
				ops, _, release, err := langsmith.DecodeMultipartPooled(ps["langsmith_multipart"].contentType, bytes.NewReader(body), int64(len(body)))
				if err != nil {
					b.Fatal(err)
				}
				translateLangSmith(tr, ops)
				release()
			}
		},
		"langfuse_otlp": func(b *testing.B) {
			for b.Loop() {
				if _, err := langfuse.DecodeOTLP("application/x-protobuf", ps["langfuse_otlp"].body); err != nil {
					b.Fatal(err)
				}
			}
		},
		"langfuse_ingestion": func(b *testing.B) {
			in := langfuse.NewIngester(time.Minute, 10000)
			for b.Loop() {
				events, _, err := langfuse.DecodeIngestion(ps["langfuse_ingestion"].body)
				if err != nil {
					b.Fatal(err)
				}
				p := in.Plan(events)
				p.Build()
				p.Commit(time.Now())
			}
		},
	}
	for _, face := range []string{"native", "langsmith_batch", "langsmith_multipart", "langfuse_otlp", "langfuse_ingestion"} {
		b.Run(face, func(b *testing.B) {
			var base, baseJSON float64
			b.Run("otlp", func(b *testing.B) { base = otlp(ps["otlp"].body, false)(b) })
			b.Run("otlp_json", func(b *testing.B) { baseJSON = otlp(ps["otlp_json"].body, true)(b) })
			b.Run("agentusage", func(b *testing.B) {
				b.ReportAllocs()
				faces[face](b)
				r := rate(b)
				b.ReportMetric(r/base, "ratio_vs_otlp")
				b.ReportMetric(r/baseJSON, "ratio_vs_otlp_json")
			})
		})
	}
}

// translateLangSmith does the receiver's work on decoded LangSmith ops: prepare them (as
// the receiver does, before its lock), plan, build the spans, commit and release.
func translateLangSmith(tr *langsmith.Translator, ops []langsmith.Op) {
	prep := langsmith.Prepare(ops)
	p := tr.Plan(ops)
	p.Build()
	p.Commit(time.Now())
	p.Release()
	prep.Release()
}
