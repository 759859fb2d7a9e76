package agentusage

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// Concurrent LangSmith requests share recycled buffers (multipart read buffers, part
// lists, prepared records): every span must still carry its own run's data.
func TestLangSmithConcurrentRequestsKeepTheirData(t *testing.T) {
	sink := new(consumertest.TracesSink)
	url, _ := startReceiver(t, sink, nil)
	const workers, requests, runs = 4, 15, 20
	runID := func(w, q, i int) string { return fmt.Sprintf("01a22a31-cdc6-7000-8000-%04x%04x%04x", w, q, i) }
	model := func(w, q, i int) string { return fmt.Sprintf("m-%d-%d-%d", w, q, i) }
	run := func(w, q, i int) map[string]string {
		return map[string]string{
			"":        fmt.Sprintf(`{"id":%q,"trace_id":"01a22a31-cdc6-7000-8000-016bd484a2ba","name":"ChatOpenAI","run_type":"llm","start_time":"2026-01-02T03:04:05Z","end_time":"2026-01-02T03:04:06Z"}`, runID(w, q, i)),
			"extra":   fmt.Sprintf(`{"metadata":{"ls_model_name":%q,"thread_id":"th-%d"}}`, model(w, q, i), w),
			"outputs": fmt.Sprintf(`{"usage_metadata":{"input_tokens":%d,"output_tokens":1}}`, 1000*w+10*q+i+1),
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range requests {
				var buf bytes.Buffer
				ct := "application/json"
				path := "/runs/batch"
				if q%2 == 0 { // multipart
					mw := multipart.NewWriter(&buf)
					for i := range runs {
						for field, body := range run(w, q, i) {
							name := "post." + runID(w, q, i)
							if field != "" {
								name += "." + field
							}
							h := textproto.MIMEHeader{}
							h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q`, name))
							p, _ := mw.CreatePart(h)
							_, _ = p.Write([]byte(body))
						}
					}
					_ = mw.Close()
					ct, path = mw.FormDataContentType(), "/runs/multipart"
				} else {
					buf.WriteString(`{"post":[`)
					for i := range runs {
						if i > 0 {
							buf.WriteByte(',')
						}
						f := run(w, q, i)
						buf.WriteString(f[""][:len(f[""])-1] + `,"extra":` + f["extra"] + `,"outputs":` + f["outputs"] + `}`)
					}
					buf.WriteString(`]}`)
				}
				code, _, resp := do(t, http.MethodPost, url+path, ct, buf.Bytes(), nil)
				assert.Equal(t, http.StatusAccepted, code, resp)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, workers*requests*runs, sink.SpanCount())
	for _, td := range sink.AllTraces() {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			spans := rss.At(i).ScopeSpans().At(0).Spans()
			for j := 0; j < spans.Len(); j++ {
				checkConcurrentSpan(t, spans.At(j))
			}
		}
	}
}

func checkConcurrentSpan(t *testing.T, s ptrace.Span) {
	t.Helper()
	m, _ := s.Attributes().Get(genai.AttrRequestModel)
	var w, q, i int
	_, err := fmt.Sscanf(m.Str(), "m-%d-%d-%d", &w, &q, &i)
	require.NoError(t, err, m.Str())
	u, ok := genai.UsageFromMap(s.Attributes())
	require.True(t, ok)
	assert.Equal(t, int64(1000*w+10*q+i+1), u.Input, "usage of the run its model names")
	th, _ := s.Attributes().Get(genai.AttrConversationID)
	assert.Equal(t, fmt.Sprintf("th-%d", w), th.Str())
	assert.Equal(t, "chat "+m.Str(), s.Name())
}
