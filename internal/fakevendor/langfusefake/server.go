// Package langfusefake is a local stand-in for Langfuse's public API, for tests: the OTLP
// traces endpoint and the projects endpoint, with the server's request checks, its
// attribute→observation mapping (view.go) and the JSON shapes of its OpenAPI document
// (spec.go). It keeps observations as Langfuse's events table does: one row per span id
// and start time, replaced whole by the newest event of that key (Rows). It records
// every request and every problem it finds, and can be scripted
// to answer with errors (429 with Retry-After, 5xx bursts, 400) or a body-size limit
// (413).
package langfusefake

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// Paths served.
const (
	TracesPath   = "/api/public/otel/v1/traces"
	ProjectsPath = "/api/public/projects"
)

// Default keys of a fake project.
const (
	DefaultPublicKey = "pk-lf-fake-public"
	DefaultSecretKey = "sk-lf-fake-secret"
	ProjectID        = "proj-agentmeter"
	ProjectName      = "agentmeter"
)

// Response is one scripted answer.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Request is what the server saw of one traces request.
type Request struct {
	Status       int // what it answered
	Spans        int // spans in the decoded body (0 when not decoded)
	EncodedBytes int
	DecodedBytes int
	Gzip         bool
	Header       http.Header
	At           time.Time
}

// Server is the fake.
type Server struct {
	*httptest.Server
	PublicKey, SecretKey string

	mu           sync.Mutex
	script       []Response
	failWith     *Response
	maxBody      int
	noProject    bool
	requests     []Request
	observations []Observation
	rows         []Observation
	rowIndex     map[rowKey]int
	problems     []string
	projectCalls int
	spec         *Spec
}

// New starts a fake Langfuse on loopback; it is closed at test cleanup.
func New(t testing.TB) *Server {
	t.Helper()
	spec, err := LoadSpec()
	if err != nil {
		t.Fatalf("langfusefake: %v", err)
	}
	s := &Server{PublicKey: DefaultPublicKey, SecretKey: DefaultSecretKey, spec: spec, rowIndex: map[rowKey]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc(TracesPath, s.traces)
	mux.HandleFunc(ProjectsPath, s.projects)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.problem("unexpected request %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// Script queues answers for the next traces requests, in order; a scripted request is
// not ingested.
func (s *Server) Script(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, rs...)
}

// FailWith answers every traces request with r until FailWith(nil).
func (s *Server) FailWith(r *Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = r
}

// SetMaxBodyBytes makes bodies above n bytes (decompressed) fail with 413, as Langfuse's
// LANGFUSE_OTEL_INGESTION_MAX_BODY_BYTES does. 0 removes the limit.
func (s *Server) SetMaxBodyBytes(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxBody = n
}

// SetNoProject makes the projects endpoint answer an empty list (an organization key).
func (s *Server) SetNoProject(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noProject = v
}

// Requests returns every traces request so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// rowKey is what Langfuse's events table replaces a row by: the span id and its start
// time (a span sent again with another start time is another row).
type rowKey struct {
	id    string
	start pcommon.Timestamp
}

// Rows returns the events table: one observation per span id and start time, each the
// newest event of its key whole (nothing of an older version survives), in the order the
// keys first arrived.
func (s *Server) Rows() []Observation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Observation(nil), s.rows...)
}

// Observations returns every ingested event, in arrival order (re-emissions included).
func (s *Server) Observations() []Observation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Observation(nil), s.observations...)
}

// Problems returns protocol and schema problems found in requests: a correct client
// leaves it empty.
func (s *Server) Problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.problems...)
}

// ProjectCalls counts GET /api/public/projects requests.
func (s *Server) ProjectCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.projectCalls
}

// WaitForObservations waits until at least n observations were ingested.
func (s *Server) WaitForObservations(t testing.TB, n int, timeout time.Duration) []Observation {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		obs := s.Observations()
		if len(obs) >= n {
			return obs
		}
		if time.Now().After(deadline) {
			t.Fatalf("langfusefake: waited %s for %d observations, have %d (requests: %d, problems: %v)",
				timeout, n, len(obs), len(s.Requests()), s.Problems())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

// authorized checks HTTP Basic auth with the project's keys.
func (s *Server) authorized(r *http.Request) bool {
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(s.PublicKey+":"+s.SecretKey))
	return r.Header.Get("Authorization") == want
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// traces is POST /api/public/otel/v1/traces.
func (s *Server) traces(w http.ResponseWriter, r *http.Request) {
	rec := Request{Header: r.Header.Clone(), At: time.Now()}
	answer := func(status int, body string, h http.Header) {
		for k, vs := range h {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		rec.Status = status
		s.mu.Lock()
		s.requests = append(s.requests, rec)
		s.mu.Unlock()
		writeJSON(w, status, body)
	}
	if r.Method != http.MethodPost {
		s.problem("traces: method %s", r.Method)
		answer(http.StatusMethodNotAllowed, `{"message":"Method not allowed"}`, nil)
		return
	}
	if !s.authorized(r) {
		answer(http.StatusUnauthorized, `{"message":"Invalid credentials. Confirm that you've configured the correct host."}`, nil)
		return
	}
	// Langfuse: 400 for a version above 4 or not a number; we also require it is sent.
	switch v := r.Header.Get("x-langfuse-ingestion-version"); {
	case v == "":
		s.problem("traces: no x-langfuse-ingestion-version header (spans would take the slow dual-write path)")
	case v != "4":
		if n, err := strconv.Atoi(v); err != nil || n > 4 {
			answer(http.StatusBadRequest, `{"message":"Invalid x-langfuse-ingestion-version header"}`, nil)
			return
		}
	}
	ct := r.Header.Get("Content-Type")
	if ct != "application/x-protobuf" && ct != "application/json" {
		s.problem("traces: content type %q", ct)
		answer(http.StatusBadRequest, `{"message":"Invalid content type"}`, nil)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		answer(http.StatusBadRequest, `{"message":"Failed to read request body"}`, nil)
		return
	}
	rec.EncodedBytes = len(raw)
	if r.Header.Get("Content-Encoding") == "gzip" {
		rec.Gzip = true
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err == nil {
			raw, err = io.ReadAll(zr)
		}
		if err != nil {
			s.problem("traces: bad gzip: %v", err)
			answer(http.StatusBadRequest, `{"message":"Failed to decompress request body"}`, nil)
			return
		}
	}
	rec.DecodedBytes = len(raw)

	s.mu.Lock()
	var scripted *Response
	if s.failWith != nil {
		f := *s.failWith
		scripted = &f
	} else if len(s.script) > 0 {
		scripted = &s.script[0]
		s.script = s.script[1:]
	}
	maxBody := s.maxBody
	s.mu.Unlock()

	req := ptraceotlp.NewExportRequest()
	if ct == "application/json" {
		err = req.UnmarshalJSON(raw)
	} else {
		err = req.UnmarshalProto(raw)
	}
	if err != nil {
		s.problem("traces: undecodable body: %v", err)
		answer(http.StatusBadRequest, `{"message":"Invalid request data"}`, nil)
		return
	}
	td := req.Traces()
	rec.Spans = td.SpanCount()

	if scripted != nil {
		answer(scripted.Status, scripted.Body, scripted.Header)
		return
	}
	if maxBody > 0 && len(raw) > maxBody {
		answer(http.StatusRequestEntityTooLarge, `{"message":"Request body too large"}`, nil)
		return
	}
	if msg := s.checkSpans(td); msg != "" {
		answer(http.StatusBadRequest, `{"message":"`+msg+`"}`, nil)
		return
	}
	s.checkSchema(req)
	obs := observe(td)
	s.mu.Lock()
	s.observations = append(s.observations, obs...)
	for _, o := range obs {
		k := rowKey{o.ID, o.StartTime}
		if i, ok := s.rowIndex[k]; ok {
			s.rows[i] = o
			continue
		}
		s.rowIndex[k] = len(s.rows)
		s.rows = append(s.rows, o)
	}
	s.mu.Unlock()
	answer(http.StatusOK, `{}`, nil)
}

// checkSpans applies the server's whole-request 400 rule: every span needs a valid
// trace and span id.
func (s *Server) checkSpans(td ptrace.Traces) string {
	for sp := range spaniter.All(td) {
		if sp.TraceID().IsEmpty() || sp.SpanID().IsEmpty() {
			s.problem("traces: span %q without trace or span id", sp.Name())
			return "Invalid span: missing traceId or spanId"
		}
	}
	return ""
}

// checkSchema validates the request as OTLP/JSON (hex ids) against the spec's request
// body, and every usage_details value against the UsageDetails schema.
func (s *Server) checkSchema(req ptraceotlp.ExportRequest) {
	js, err := req.MarshalJSON()
	if err != nil {
		s.problem("traces: re-encoding as JSON: %v", err)
		return
	}
	if schema, ok := s.spec.RequestSchema(TracesPath, "post"); ok {
		for _, p := range s.spec.ValidateJSON(schema, js) {
			s.problem("traces: request vs spec: %s", p)
		}
	} else {
		s.problem("spec: no request schema for %s", TracesPath)
	}
	usageSchema, _ := s.spec.Schema("UsageDetails")
	obsSchema, _ := s.spec.Schema("Observation")
	costSchema, _ := dig(obsSchema, "properties", "costDetails").(map[string]any)
	if costSchema == nil {
		s.problem("spec: no Observation.costDetails schema")
	}
	flat := map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "integer"}}
	for sp := range spaniter.All(req.Traces()) {
		if v, ok := sp.Attributes().Get("langfuse.observation.cost_details"); ok && costSchema != nil {
			if v.Str() == "" {
				s.problem("span %s: cost_details is not a string", sp.SpanID())
			}
			for _, p := range s.spec.ValidateJSON(costSchema, []byte(v.Str())) {
				s.problem("span %s: cost_details vs spec Observation.costDetails: %s", sp.SpanID(), p)
			}
			var raw map[string]any
			_ = json.Unmarshal([]byte(v.Str()), &raw)
			for k, x := range raw {
				if f, ok := x.(float64); !ok || f < 0 {
					s.problem("span %s: cost_details[%q] is not a non-negative number", sp.SpanID(), k)
				}
			}
		}
		v, ok := sp.Attributes().Get("langfuse.observation.usage_details")
		if !ok {
			continue
		}
		if v.Str() == "" {
			s.problem("span %s: usage_details is not a string", sp.SpanID())
			continue
		}
		for _, p := range s.spec.ValidateJSON(usageSchema, []byte(v.Str())) {
			s.problem("span %s: usage_details vs spec UsageDetails: %s", sp.SpanID(), p)
		}
		// Langfuse keys, flat: the spec's OpenAI-shaped alternatives would be converted.
		for _, p := range s.spec.ValidateJSON(flat, []byte(v.Str())) {
			s.problem("span %s: usage_details is not a flat integer map: %s", sp.SpanID(), p)
		}
	}
}

// projects is GET /api/public/projects.
func (s *Server) projects(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.projectCalls++
	noProject := s.noProject
	s.mu.Unlock()
	if r.Method != http.MethodGet {
		s.problem("projects: method %s", r.Method)
		writeJSON(w, http.StatusMethodNotAllowed, `{"message":"Method not allowed"}`)
		return
	}
	if !s.authorized(r) {
		writeJSON(w, http.StatusUnauthorized, `{"message":"Invalid credentials. Confirm that you've configured the correct host."}`)
		return
	}
	body := ProjectsBody(!noProject)
	if schema, ok := s.spec.ResponseSchema(ProjectsPath, "get", "200"); ok {
		for _, p := range s.spec.ValidateJSON(schema, []byte(body)) {
			s.problem("projects: response vs spec: %s", p)
		}
	}
	writeJSON(w, http.StatusOK, body)
}

// ProjectsBody is the fake's answer to GET /api/public/projects.
func ProjectsBody(withProject bool) string {
	if !withProject {
		return `{"data":[]}`
	}
	return `{"data":[{"id":"` + ProjectID + `","name":"` + ProjectName +
		`","organization":{"id":"org-agentmeter","name":"agentmeter"},"metadata":{},"retentionDays":null}]}`
}

func observe(td ptrace.Traces) []Observation {
	out := make([]Observation, 0, td.SpanCount())
	for sp := range spaniter.All(td) {
		out = append(out, Observe(sp))
	}
	return out
}

// TraceUsage sums usage per trace id over observations, as Langfuse sums a trace: every
// key but total. Merged subagent usage lives in metadata and is not counted.
func TraceUsage(obs []Observation) map[string]int64 {
	out := map[string]int64{}
	for _, o := range obs {
		out[o.TraceID] += o.UsageTotal()
	}
	return out
}

// ByID indexes observations by their hex id (the last one wins: Langfuse upserts).
func ByID(obs []Observation) map[string]Observation {
	out := make(map[string]Observation, len(obs))
	for _, o := range obs {
		out[o.ID] = o
	}
	return out
}
