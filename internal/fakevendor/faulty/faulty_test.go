package faulty

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func otlpBody(t *testing.T, runs int) ([]byte, []Item) {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for i := 0; i < runs; i++ {
		AppendRun(ss.Spans(), i, time.Now(), "")
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	return b, SpanItems(td)
}

func postLangfuse(t *testing.T, url string, body []byte) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, url+"/api/public/otel/v1/traces", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Authorization", "Basic old")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestLangfuseFaultsAndCounting(t *testing.T) {
	f := New(Langfuse, nil)
	srv := f.Serve()
	defer srv.Close()
	body, items := otlpBody(t, 2)
	var tokens int64
	for _, it := range items {
		tokens += it.Tokens
	}
	require.Len(t, items, 6)
	require.Positive(t, tokens)

	f.Script(Fault{Kind: Status, Status: 429, RetryAfter: "1"}, Fault{Kind: Status, Status: 503})
	st, err := postLangfuse(t, srv.URL, body)
	require.NoError(t, err)
	assert.Equal(t, 429, st)
	st, _ = postLangfuse(t, srv.URL, body)
	assert.Equal(t, 503, st)
	assert.Zero(t, f.Stats().Accepted, "refused requests are not ingested")

	st, _ = postLangfuse(t, srv.URL, body)
	assert.Equal(t, 200, st)
	st, _ = postLangfuse(t, srv.URL, body) // a retry of a delivered batch
	assert.Equal(t, 200, st)
	s := f.Stats()
	assert.Equal(t, 6, s.Accepted)
	assert.Equal(t, 6, s.Duplicates)
	assert.Equal(t, tokens, s.Tokens, "tokens of the first copy only")
	assert.Equal(t, map[int]int{429: 1, 503: 1}, s.Faulted)

	// 413 above 3 items: a 6-span request is refused, a 3-span one passes
	f.Set(Fault{Kind: TooLarge, MaxItems: 3})
	st, _ = postLangfuse(t, srv.URL, body)
	assert.Equal(t, 413, st)
	small, _ := otlpBody(t, 1)
	st, _ = postLangfuse(t, srv.URL, small)
	assert.Equal(t, 200, st)
	assert.Equal(t, 9, f.Stats().Accepted)
	assert.Zero(t, f.Stats().Refused, "413 is retried (split) by the Langfuse exporter")

	// reset: the client gets no answer, nothing is ingested
	f.Set(Fault{Kind: Reset})
	other, _ := otlpBody(t, 1)
	_, err = postLangfuse(t, srv.URL, other)
	require.Error(t, err)
	assert.Equal(t, 9, f.Stats().Accepted)
	assert.Equal(t, 1, f.Stats().Faulted[0])

	// rotated key: the old credential is refused and counted as dropped
	f.Clear()
	f.RotateKey("Basic new", "Basic inner")
	st, _ = postLangfuse(t, srv.URL, other)
	assert.Equal(t, 401, st)
	assert.Equal(t, 3, f.Stats().Refused)
	assert.Len(t, f.RefusedIDs(), 3)
}

func TestSlowIsIngestedAfterClientTimeout(t *testing.T) {
	f := New(Langfuse, nil)
	srv := f.Serve()
	defer srv.Close()
	f.Set(Fault{Kind: Slow, Delay: 300 * time.Millisecond})
	body, _ := otlpBody(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/public/otel/v1/traces", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-protobuf")
	_, err := http.DefaultClient.Do(req)
	require.Error(t, err, "the client times out")
	require.Eventually(t, func() bool { return f.Stats().Accepted == 3 }, 5*time.Second, 10*time.Millisecond,
		"the vendor still ingests it")
	assert.Equal(t, 1, f.Stats().Slowed)
}

func TestInnerFakeSeesItsCredential(t *testing.T) {
	var got []string
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("x-api-key"))
		w.WriteHeader(http.StatusAccepted)
	})
	f := New(LangSmith, inner)
	srv := f.Serve()
	defer srv.Close()
	f.RotateKey("new-key", "inner-key")

	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i, id := range []string{"00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"} {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="post.%s"`, id))
		h.Set("Content-Type", "application/json")
		p, _ := mw.CreatePart(h)
		fmt.Fprintf(p, `{"id":%q}`, id)
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="post.%s.outputs"`, id))
		p, _ = mw.CreatePart(h)
		fmt.Fprintf(p, `{"usage_metadata":{"input_tokens":%d,"output_tokens":5}}`, 10*(i+1))
	}
	require.NoError(t, mw.Close())
	post := func(key string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/runs/multipart", bytes.NewReader(buf.Bytes()))
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("x-api-key", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, 401, post("old-key"))
	assert.Equal(t, 202, post("new-key"))
	assert.Equal(t, []string{"inner-key"}, got)
	s := f.Stats()
	assert.Equal(t, 2, s.Accepted)
	assert.Equal(t, int64(40), s.Tokens)
	assert.Zero(t, s.Refused, "refused runs were delivered later")
}

func TestLoadRetriesUntilAccepted(t *testing.T) {
	var calls int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	l := &Load{Addr: srv.Listener.Addr().String(), TracesPerRequest: 2, Backoff: time.Millisecond}
	td := ptrace.NewTraces()
	AppendRun(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans(), 1, time.Now(), "")
	require.True(t, l.SendRetrying(context.Background(), td))
	s := l.Stats()
	assert.Equal(t, 3, s.Spans)
	assert.Equal(t, 2, s.Refusals[503])
	assert.Len(t, l.RunIDs(), 3)
	for id := range l.RunIDs() {
		assert.Len(t, id, 36)
	}
}

// A request abandoned while the collector is still answering it is not sent, and its
// spans are unsure: the collector may have taken them in.
func TestLoadAbandonedRequestIsUnsure(t *testing.T) {
	answering := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // taken in; the connection is then watched
		close(answering)
		<-r.Context().Done()
	}))
	defer srv.Close()
	l := &Load{Addr: srv.Listener.Addr().String(), Backoff: time.Millisecond}
	td := ptrace.NewTraces()
	AppendRun(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans(), 1, time.Now(), "")
	stop, cancel := context.WithCancel(context.Background())
	go func() { <-answering; cancel() }()
	require.False(t, l.SendRetrying(stop, td))
	assert.Zero(t, l.Stats().Spans)
	spans, runs := l.Unsure()
	assert.Len(t, spans, 3)
	assert.Len(t, runs, 3)

	// a front that took them in counts them apart
	f := New(Langfuse, nil)
	var items []Item
	for id := range spans {
		items = append(items, Item{ID: id, Tokens: 7})
	}
	f.accept(items[:2])
	n, tok := f.TokensOf(spans)
	assert.Equal(t, 2, n)
	assert.Equal(t, int64(14), tok)
}
