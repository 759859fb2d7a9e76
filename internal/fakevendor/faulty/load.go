package faulty

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder/dottedordertest"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// Load is a steady OTLP/HTTP sender that behaves like an OTel SDK exporter with
// retries: every Interval it posts TracesPerRequest agent runs (a lead invoke_agent span
// with two chat spans carrying usage) and, on a retryable answer (429, 502, 503, 504) or
// a network error, posts the same body again after Backoff until it is accepted. It
// records exactly what the collector accepted, so a test compares that with what the
// vendor finally received.
type Load struct {
	Addr             string        // OTLP/HTTP host:port
	TracesPerRequest int           // runs per request (3 spans each)
	Interval         time.Duration // between requests
	Backoff          time.Duration // between retries of a refused request (the first, with MaxBackoff)
	MaxBackoff       time.Duration // above Backoff: the wait doubles per refusal up to it, as an SDK's backoff
	PadBytes         int           // size of an extra attribute on each chat span (0: none)
	Placed           bool          // spans carry their LangSmith placement, as the agentmeter runtime's do
	Client           *http.Client

	mu     sync.Mutex
	spans  map[string]Item // accepted spans by SpanID
	runIDs map[string]bool // the LangSmith run ids of the accepted spans
	// Spans of requests the collector never acknowledged: abandoned at a stop or refused
	// for good. They may still reach a vendor: the collector can have taken the request in
	// before it died mid-answer, or one of its pipelines accepted it while another refused.
	unsure     map[string]bool
	unsureRuns map[string]bool
	tokens     int64
	requests   int
	refusals   map[int]int // retryable refusals by status (0 = network error)
	permanent  int         // requests answered with a non-retryable status (not resent)
	answers    []Answer
	seq        int
}

// Answer is one attempt of a request: how long the collector took to answer it, and
// with what status (0: a network error, including the client's timeout).
type Answer struct {
	Took   time.Duration
	Status int
}

// LoadStats are a sender's counters.
type LoadStats struct {
	Spans     int         // distinct spans the collector accepted
	Tokens    int64       // their input + output tokens
	Requests  int         // accepted requests
	Refusals  map[int]int // retryable refusals by status (0 = network error)
	Permanent int         // requests refused for good (4xx other than 429)
}

func (l *Load) init() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spans == nil {
		l.spans, l.runIDs, l.refusals = map[string]Item{}, map[string]bool{}, map[int]int{}
		l.unsure, l.unsureRuns = map[string]bool{}, map[string]bool{}
	}
	if l.Client == nil {
		l.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if l.Backoff == 0 {
		l.Backoff = 100 * time.Millisecond
	}
	if l.TracesPerRequest == 0 {
		l.TracesPerRequest = 1
	}
}

// Run sends until ctx ends; a request being retried when ctx ends is finished first
// unless stop ends too (a hard stop: the request is then counted as never sent).
func (l *Load) Run(ctx, stop context.Context) {
	l.init()
	tick := time.NewTicker(l.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		td := l.build()
		l.SendRetrying(stop, td)
	}
}

// SendRetrying posts td until accepted, refused for good, or stop ends. It reports
// whether the collector accepted it.
func (l *Load) SendRetrying(stop context.Context, td ptrace.Traces) bool {
	l.init()
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		panic(fmt.Sprintf("marshal otlp: %v", err)) // pdata always marshals
	}
	backoff := l.Backoff
	for {
		began := time.Now()
		status, err := l.post(stop, body)
		took := time.Since(began)
		if err != nil && stop.Err() != nil {
			l.abandon(td) // abandoned by the caller, not answered
			return false
		}
		l.mu.Lock()
		if err != nil {
			status = 0
		}
		l.answers = append(l.answers, Answer{Took: took, Status: status})
		l.mu.Unlock()
		switch {
		case err == nil && status/100 == 2:
			l.record(td)
			return true
		case err == nil && !retryableStatus(status):
			l.mu.Lock()
			l.permanent++
			l.mu.Unlock()
			l.abandon(td)
			return false
		}
		l.mu.Lock()
		l.refusals[status]++
		l.mu.Unlock()
		select {
		case <-stop.Done():
			l.abandon(td)
			return false
		case <-time.After(backoff):
		}
		if l.MaxBackoff > backoff {
			backoff = min(2*backoff, l.MaxBackoff)
		}
	}
}

func retryableStatus(s int) bool {
	return s == http.StatusTooManyRequests || s == http.StatusBadGateway ||
		s == http.StatusServiceUnavailable || s == http.StatusGatewayTimeout
}

func (l *Load) post(ctx context.Context, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+l.Addr+"/v1/traces", bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := l.Client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("post otlp: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func (l *Load) record(td ptrace.Traces) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	for sp := range spaniter.All(td) {
		id := SpanID(sp)
		if _, seen := l.spans[id]; seen {
			continue
		}
		u, _ := genai.UsageFromMap(sp.Attributes())
		l.spans[id] = Item{ID: id, Tokens: u.Input + u.Output}
		l.runIDs[LangSmithRunID(sp)] = true
		l.tokens += u.Input + u.Output
	}
}

// abandon notes the spans of a request the collector never acknowledged.
func (l *Load) abandon(td ptrace.Traces) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for sp := range spaniter.All(td) {
		id := SpanID(sp)
		if _, sent := l.spans[id]; !sent {
			l.unsure[id] = true
			l.unsureRuns[LangSmithRunID(sp)] = true
		}
	}
}

// Unsure returns the ids (Langfuse face, LangSmith run) of spans sent in requests the
// collector never acknowledged: a vendor may or may not hold them, and neither is a
// fault.
func (l *Load) Unsure() (spans, runs map[string]bool) {
	l.init()
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.unsure), maps.Clone(l.unsureRuns)
}

// Stats returns the sender's counters.
func (l *Load) Stats() LoadStats {
	l.init()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := LoadStats{Spans: len(l.spans), Tokens: l.tokens, Requests: l.requests, Refusals: map[int]int{}, Permanent: l.permanent}
	for k, v := range l.refusals {
		s.Refusals[k] = v
	}
	return s
}

// Answers returns every attempt's answer time and status, in the order answered.
func (l *Load) Answers() []Answer {
	l.init()
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Answer(nil), l.answers...)
}

// SpanIDs returns the accepted spans' ids (Langfuse face ids).
func (l *Load) SpanIDs() map[string]bool {
	l.init()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]bool, len(l.spans))
	for id := range l.spans {
		out[id] = true
	}
	return out
}

// RunIDs returns the accepted spans' LangSmith run ids.
func (l *Load) RunIDs() map[string]bool {
	l.init()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]bool, len(l.runIDs))
	for id := range l.runIDs {
		out[id] = true
	}
	return out
}

// build makes the next request: TracesPerRequest runs of three spans.
func (l *Load) build() ptrace.Traces {
	l.mu.Lock()
	l.seq++
	seq := l.seq
	l.mu.Unlock()
	td, spans := newRequest()
	now := time.Now()
	pad := ""
	if l.PadBytes > 0 {
		pad = strings.Repeat("x", l.PadBytes)
	}
	for i := 0; i < l.TracesPerRequest; i++ {
		AppendRun(spans, seq*1000+i, now, pad)
	}
	if l.Placed {
		dottedordertest.Place(td)
	}
	return td
}

// newRequest is an empty request of the sender's resource and scope, and its span slice.
func newRequest() (ptrace.Traces, ptrace.SpanSlice) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(genai.AttrServiceName, "agentmeter-faultload")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("github.com/agentmeter/agentmeter/internal/fakevendor/faulty")
	return td, ss.Spans()
}

// AppendRun appends one agent run: invoke_agent lead_agent with two chat children whose
// usage depends on n (so token sums are checked, not just counts).
func AppendRun(spans ptrace.SpanSlice, n int, at time.Time, pad string) {
	var tid pcommon.TraceID
	_, _ = rand.Read(tid[:])
	ids := make([]pcommon.SpanID, 3)
	for i := range ids {
		_, _ = rand.Read(ids[i][:])
	}
	thread := fmt.Sprintf("thread-%d", n)
	mk := func(i int, parent pcommon.SpanID, name string, kind ptrace.SpanKind, from, to time.Duration) ptrace.Span {
		sp := spans.AppendEmpty()
		sp.SetTraceID(tid)
		sp.SetSpanID(ids[i])
		sp.SetParentSpanID(parent)
		sp.SetName(name)
		sp.SetKind(kind)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at.Add(from)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(to)))
		a := sp.Attributes()
		a.PutStr(genai.AttrConversationID, thread)
		a.PutStr(genai.AttrRunID, fmt.Sprintf("run-%d", n))
		a.PutStr(genai.AttrCaller, "lead_agent")
		return sp
	}
	root := mk(0, pcommon.SpanID{}, genai.SpanName(genai.OpInvokeAgent, "lead_agent"), ptrace.SpanKindInternal, 0, 300*time.Millisecond)
	root.Attributes().PutStr(genai.AttrOperationName, genai.OpInvokeAgent)
	root.Attributes().PutStr(genai.AttrAgentName, "lead_agent")
	for c := 1; c <= 2; c++ {
		sp := mk(c, ids[0], genai.SpanName(genai.OpChat, "gpt-4o"), ptrace.SpanKindClient,
			time.Duration(c*100)*time.Millisecond, time.Duration(c*100+90)*time.Millisecond)
		a := sp.Attributes()
		a.PutStr(genai.AttrOperationName, genai.OpChat)
		a.PutStr(genai.AttrProviderName, "openai")
		a.PutStr(genai.AttrRequestModel, "gpt-4o")
		a.PutStr(genai.AttrResponseModel, "gpt-4o-2026-08-01")
		genai.PutUsage(a, genai.Usage{Input: int64(100 + n%97 + c), Output: int64(10 + n%13*c)})
		if pad != "" {
			a.PutStr("agentmeter.faultload.pad", pad)
		}
	}
}

// LangSmithRunID is the run id LangSmith gives a span: the trace id as a UUID for a root
// span, else the span id in the low 8 bytes of a UUID (LangSmith's OTLP translator, which
// the langsmith exporter follows; docs/langsmith.md).
func LangSmithRunID(sp ptrace.Span) string {
	if sp.ParentSpanID().IsEmpty() {
		return uuid(sp.TraceID())
	}
	var b [16]byte
	id := sp.SpanID()
	copy(b[8:], id[:])
	return uuid(b)
}

func uuid(b [16]byte) string {
	const hx = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hx[c>>4], hx[c&15])
	}
	return string(out)
}
