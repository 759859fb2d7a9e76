// Package faulty is a scriptable fault-injecting front for the fake vendor servers
// (Langfuse's OTLP face, LangSmith's run-ingest face). It sits as an http.Handler in front
// of a vendor fake (or answers by itself) and, on the ingest path, can answer 429 with
// Retry-After, 5xx bursts, 413 above a size, 401 for a rotated-out key, slow answers past
// the client's timeout, or reset the connection half-way through the body. It decodes
// every body it lets through and counts what the vendor finally accepted, de-duplicated
// by span (Langfuse) or run (LangSmith) id, with the duplicates and the tokens of the
// first copy of each, so a test can assert "nothing lost" exactly.
package faulty

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Face says which vendor API the front speaks.
type Face int

const (
	// Langfuse is POST /api/public/otel/v1/traces (OTLP/HTTP, items are spans).
	Langfuse Face = iota
	// LangSmith is POST /runs/multipart and /runs/batch (items are runs).
	LangSmith
)

func (f Face) String() string {
	if f == LangSmith {
		return "langsmith"
	}
	return "langfuse"
}

// Kind is the kind of fault answered to an ingest request.
type Kind int

const (
	// None lets the request through.
	None Kind = iota
	// Status answers Fault.Status (with Retry-After when set) without ingesting.
	Status
	// Slow waits Fault.Delay, then lets the request through: the vendor ingests it even
	// though a client with a shorter timeout has given up (and will send it again).
	Slow
	// Reset reads half the body, then closes the connection without an answer.
	Reset
	// TooLarge answers 413 to requests holding more than Fault.MaxItems items and lets
	// the smaller ones through, as a server body limit does.
	TooLarge
)

// Fault is one scripted behaviour.
type Fault struct {
	Kind       Kind
	Status     int           // Status: the answer's status
	RetryAfter string        // Status: the Retry-After header, if any
	Delay      time.Duration // Slow: how long to wait before handling
	MaxItems   int           // TooLarge: the largest request accepted
}

func (f Fault) String() string {
	switch f.Kind {
	case Status:
		if f.RetryAfter != "" {
			return fmt.Sprintf("%d (Retry-After %s)", f.Status, f.RetryAfter)
		}
		return fmt.Sprint(f.Status)
	case Slow:
		return fmt.Sprintf("slow %s", f.Delay)
	case Reset:
		return "reset mid-body"
	case TooLarge:
		return fmt.Sprintf("413 above %d items", f.MaxItems)
	}
	return "none"
}

// Item is one span or run in a request body.
type Item struct {
	ID     string
	Tokens int64 // input + output tokens the item reports as its own usage
}

// Keys of Stats.Faulted besides HTTP statuses.
const (
	ResetKey = 0  // connections reset mid-body
	SlowKey  = -1 // requests delayed past the client's timeout
)

// Stats are the front's counters.
type Stats struct {
	Requests   int         // ingest requests seen
	Faulted    map[int]int // answers by status given by a fault (ResetKey, SlowKey: resets, delays)
	Slowed     int         // requests delayed by a Slow fault
	Accepted   int         // distinct items the vendor accepted
	Duplicates int         // items accepted again after their first acceptance
	Tokens     int64       // tokens of the distinct accepted items
	// Refused counts distinct items refused with a non-retryable status (401, 403, 400,
	// 413) that were never accepted later: data the exporter drops.
	Refused int
}

// Front is the fault-injecting handler. The zero value is not usable; call New.
type Front struct {
	face  Face
	inner http.Handler

	mu        sync.Mutex
	fault     Fault   // the standing fault, until Clear
	script    []Fault // one-shot faults for the next requests, before the standing one
	validCred string  // when set, other credentials get 401
	innerCred string  // credential handed to the inner fake when validCred is set
	requests  int
	faulted   map[int]int
	slowed    int
	accepted  map[string]int // id -> times accepted
	tokens    int64
	tokensOf  map[string]int64 // id -> tokens at its first acceptance
	refused   map[string]bool  // ids refused permanently
	acceptAt  time.Time        // last time a new item was accepted
}

// New returns a front speaking face. inner is the vendor fake that handles what the
// front lets through (nil: the front answers 200/202 itself, for soaks where the fake's
// checks would cost more than the collector under test).
func New(face Face, inner http.Handler) *Front {
	return &Front{face: face, inner: inner, faulted: map[int]int{}, accepted: map[string]int{}, tokensOf: map[string]int64{}, refused: map[string]bool{}}
}

// Serve starts the front on a loopback port.
func (f *Front) Serve() *httptest.Server { return httptest.NewServer(f) }

// Set makes every ingest request get fault until Clear.
func (f *Front) Set(fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fault
}

// Clear ends the standing fault and drops the script.
func (f *Front) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = Fault{}
	f.script = nil
}

// Script queues one-shot faults for the next ingest requests, ahead of the standing one
// (e.g. a burst of five 503s: Script(503, 503, ...)).
func (f *Front) Script(faults ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, faults...)
}

// RotateKey makes the front accept only requests carrying cred (Langfuse: the whole
// Authorization header; LangSmith: the x-api-key value) and answer 401 to every other
// one, as a vendor does once a key was rotated out. Requests let through reach the inner
// fake with innerCred in place of cred, so the fake's own check keeps passing.
func (f *Front) RotateKey(cred, innerCred string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.validCred, f.innerCred = cred, innerCred
}

// Stats returns a copy of the counters.
func (f *Front) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.statsLocked()
}

// StatsAndTokensOf is Stats and TokensOf(ids) read at one instant: an item of ids that
// arrives between two separate reads would be subtracted from counters that do not
// hold it yet.
func (f *Front) StatsAndTokensOf(ids map[string]bool) (s Stats, accepted int, tokens int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	accepted, tokens = f.tokensOfLocked(ids)
	return f.statsLocked(), accepted, tokens
}

func (f *Front) statsLocked() Stats {
	s := Stats{Requests: f.requests, Faulted: map[int]int{}, Slowed: f.slowed, Accepted: len(f.accepted), Tokens: f.tokens}
	for k, v := range f.faulted {
		s.Faulted[k] = v
	}
	for _, n := range f.accepted {
		s.Duplicates += n - 1
	}
	for id := range f.refused {
		if f.accepted[id] == 0 {
			s.Refused++
		}
	}
	return s
}

// AcceptedIDs returns the distinct accepted ids.
func (f *Front) AcceptedIDs() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.accepted))
	for k, v := range f.accepted {
		out[k] = v
	}
	return out
}

// TokensOf sums the tokens of the accepted items among ids.
func (f *Front) TokensOf(ids map[string]bool) (accepted int, tokens int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokensOfLocked(ids)
}

func (f *Front) tokensOfLocked(ids map[string]bool) (accepted int, tokens int64) {
	for id := range ids {
		if f.accepted[id] > 0 {
			accepted++
			tokens += f.tokensOf[id]
		}
	}
	return accepted, tokens
}

// RefusedIDs returns the ids refused with a non-retryable status and never accepted.
func (f *Front) RefusedIDs() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]bool{}
	for id := range f.refused {
		if f.accepted[id] == 0 {
			out[id] = true
		}
	}
	return out
}

// LastAccept is when a new item was last accepted (zero before the first).
func (f *Front) LastAccept() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acceptAt
}

// ingestPath reports whether r is an ingest request of the front's face.
func (f *Front) ingestPath(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	if f.face == LangSmith {
		return r.URL.Path == "/runs/multipart" || r.URL.Path == "/runs/batch"
	}
	return r.URL.Path == "/api/public/otel/v1/traces"
}

func (f *Front) credential(r *http.Request) string {
	if f.face == LangSmith {
		return r.Header.Get("x-api-key")
	}
	return r.Header.Get("Authorization")
}

func (f *Front) setCredential(r *http.Request, v string) {
	if f.face == LangSmith {
		r.Header.Set("x-api-key", v)
		return
	}
	r.Header.Set("Authorization", v)
}

// next pops the fault for this request.
func (f *Front) next() Fault {
	if len(f.script) > 0 {
		ft := f.script[0]
		f.script = f.script[1:]
		return ft
	}
	return f.fault
}

// ServeHTTP applies the scripted fault to ingest requests and passes everything else to
// the inner fake (or answers it: /info and the credential checks).
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !f.ingestPath(r) {
		f.passOther(w, r)
		return
	}
	f.mu.Lock()
	f.requests++
	fault := f.next()
	validCred, innerCred := f.validCred, f.innerCred
	f.mu.Unlock()

	if fault.Kind == Reset {
		f.reset(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	items, decErr := decode(f.face, r.Header, body)

	if validCred != "" && f.credential(r) != validCred {
		f.refuse(w, items, http.StatusUnauthorized, "", `{"message":"Invalid credentials (the key was rotated)"}`)
		return
	}
	switch fault.Kind {
	case Status:
		f.refuse(w, items, fault.Status, fault.RetryAfter, `{"message":"fault injected"}`)
		return
	case TooLarge:
		if len(items) > fault.MaxItems {
			f.refuse(w, items, http.StatusRequestEntityTooLarge, "", `{"message":"Request body too large"}`)
			return
		}
	case Slow:
		f.mu.Lock()
		f.slowed++
		f.faulted[SlowKey]++
		f.mu.Unlock()
		// ingested after the delay even if the client has given up: what a slow vendor
		// does, and why a retry after a client timeout makes a duplicate
		time.Sleep(fault.Delay)
	}
	if decErr != nil {
		http.Error(w, decErr.Error(), http.StatusBadRequest)
		return
	}
	if validCred != "" {
		f.setCredential(r, innerCred)
	}
	status := f.deliver(w, r, body)
	if status/100 == 2 || (f.face == LangSmith && status == http.StatusConflict) {
		f.accept(items)
	}
}

// deliver hands the request to the inner fake (or answers it) and returns the status.
func (f *Front) deliver(w http.ResponseWriter, r *http.Request, body []byte) int {
	if f.inner == nil {
		if f.face == LangSmith {
			w.WriteHeader(http.StatusAccepted)
			return http.StatusAccepted
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "{}")
		return http.StatusOK
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	f.inner.ServeHTTP(rec, r)
	return rec.status
}

// passOther handles non-ingest requests: the inner fake's, or a minimal answer.
func (f *Front) passOther(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	validCred, innerCred := f.validCred, f.innerCred
	f.mu.Unlock()
	if validCred != "" {
		if f.credential(r) != validCred && !(f.face == LangSmith && r.URL.Path == "/info") {
			http.Error(w, `{"message":"Invalid credentials"}`, http.StatusUnauthorized)
			return
		}
		if f.credential(r) != "" {
			f.setCredential(r, innerCred)
		}
	}
	if f.inner != nil {
		f.inner.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case f.face == LangSmith && r.URL.Path == "/info":
		_, _ = io.WriteString(w, `{"version":"faulty","batch_ingest_config":{"use_multipart_endpoint":true,"size_limit":100,"size_limit_bytes":20971520}}`)
	case f.face == LangSmith && strings.HasPrefix(r.URL.Path, "/sessions"):
		_, _ = io.WriteString(w, `[]`)
	case f.face == Langfuse && r.URL.Path == "/api/public/projects":
		_, _ = io.WriteString(w, `{"data":[{"id":"proj-faulty","name":"faulty"}]}`)
	default:
		http.NotFound(w, r)
	}
}

// reset reads about half the body and closes the connection: the client sees its
// request cut off (connection reset / EOF), never an answer.
func (f *Front) reset(w http.ResponseWriter, r *http.Request) {
	half := r.ContentLength / 2
	if half <= 0 {
		half = 512
	}
	_, _ = io.CopyN(io.Discard, r.Body, half)
	f.mu.Lock()
	f.faulted[ResetKey]++
	f.mu.Unlock()
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(interface{ SetLinger(int) error }); ok {
		_ = tc.SetLinger(0) // RST, not FIN
	}
	_ = conn.Close()
}

// refuse answers status without ingesting; permanent refusals remember the items.
func (f *Front) refuse(w http.ResponseWriter, items []Item, status int, retryAfter, body string) {
	f.mu.Lock()
	f.faulted[status]++
	if permanent(status, len(items)) {
		for _, it := range items {
			f.refused[it.ID] = true
		}
	}
	f.mu.Unlock()
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// permanent reports whether the exporters treat status on a request of n items as final
// (they drop the data): 401/403/400 for both; 413 only for a single item, since both
// exporters split a larger request in halves and resend.
func permanent(status, n int) bool {
	switch {
	case status == http.StatusRequestEntityTooLarge:
		return n == 1
	case status == http.StatusRequestTimeout, status == http.StatusTooEarly, status == http.StatusTooManyRequests, status/100 == 5:
		return false
	}
	return status/100 == 4
}

func (f *Front) accept(items []Item) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, it := range items {
		if f.accepted[it.ID] == 0 {
			f.tokens += it.Tokens
			f.tokensOf[it.ID] = it.Tokens
			f.acceptAt = time.Now()
		}
		f.accepted[it.ID]++
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}
