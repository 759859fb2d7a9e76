// Package fakevendor holds local fake vendor servers for tests.
package fakevendor

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// langSmithSpec is the derived LangSmith ingestion spec (its header says what it was
// assembled from); a test pins its checksum so it only changes on purpose.
//
//go:embed langsmith-ingest.derived.openapi.yaml
var langSmithSpec []byte

// LangSmithSpec returns the embedded derived ingestion spec.
func LangSmithSpec() []byte { return langSmithSpec }

var (
	lsSchemasOnce sync.Once
	lsRunSchema   *jsonschema.Schema
	lsUsageSchema *jsonschema.Schema
	lsSchemasErr  error
)

// langSmithSchemas compiles RunIngest and UsageMetadata from the spec, formats asserted
// (uuid ids). OpenAPI 3.0's "nullable" is not JSON Schema and is ignored.
func langSmithSchemas() (run, usage *jsonschema.Schema, err error) {
	lsSchemasOnce.Do(func() {
		var doc any
		if lsSchemasErr = yaml.Unmarshal(langSmithSpec, &doc); lsSchemasErr != nil {
			return
		}
		raw, err := json.Marshal(doc)
		if err != nil {
			lsSchemasErr = err
			return
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			lsSchemasErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		if lsSchemasErr = c.AddResource("langsmith-ingest.json", inst); lsSchemasErr != nil {
			return
		}
		if lsRunSchema, lsSchemasErr = c.Compile("langsmith-ingest.json#/components/schemas/RunIngest"); lsSchemasErr != nil {
			return
		}
		lsUsageSchema, lsSchemasErr = c.Compile("langsmith-ingest.json#/components/schemas/UsageMetadata")
	})
	return lsRunSchema, lsUsageSchema, lsSchemasErr
}

// LangSmithResponse is one scripted answer to an ingest request.
type LangSmithResponse struct {
	Status     int
	RetryAfter string
	Body       string
}

// LangSmithRequest records one ingest request the fake accepted or refused.
type LangSmithRequest struct {
	Path     string
	Encoding string
	TenantID string   // the X-Tenant-Id header
	RawBytes int      // uncompressed body size
	RunIDs   []string // the runs posted
	PatchIDs []string // the runs patched
	Status   int
}

// LangSmith is a fake LangSmith API: /info, /sessions, /runs/multipart, /runs/batch and
// PATCH /runs/{id}. It parses every body, checks every run against the vendor rules and
// the derived OpenAPI schema, and records the runs. Violations are collected, not answered, so a test sees
// all of them at once.
//
// Posts and patches behave as the service's: a post of a run id it holds already changes
// nothing and the request is answered 409 (the other runs of the request are taken; the
// SDKs read 409 as "already ingested"); a patch replaces the fields it carries. The
// service ingests asynchronously and accepts a patch before its run's post (the SDKs send
// them from different batches): the fake holds such a patch and applies it when the post
// arrives, so a patch always wins over the post it updates. Patches of one run apply in
// the order they arrive; nothing orders them by content.
type LangSmith struct {
	*httptest.Server
	APIKey string

	mu          sync.Mutex
	info        []byte // nil = 404
	noMultipart bool
	script      []LangSmithResponse
	down        int // when non-zero every ingest request gets this status
	runs        map[string]map[string]any
	pending     map[string][]map[string]any // patches of runs not posted yet, in arrival order
	patches     map[string][]map[string]any // patches applied per run, in the order applied
	order       []string
	requests    []LangSmithRequest
	violations  []string
}

// LangSmithInfo is the batch_ingest_config the fake's /info announces.
type LangSmithInfo struct {
	UseMultipart   bool
	SizeLimit      int
	SizeLimitBytes int
}

// NewLangSmith starts a fake on a loopback port that accepts apiKey.
func NewLangSmith(apiKey string) *LangSmith {
	f := &LangSmith{APIKey: apiKey, runs: map[string]map[string]any{},
		pending: map[string][]map[string]any{}, patches: map[string][]map[string]any{}}
	f.SetInfo(&LangSmithInfo{UseMultipart: true, SizeLimit: 100, SizeLimitBytes: 20 << 20})
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// SetInfo sets /info's batch_ingest_config; nil makes /info answer 404.
func (f *LangSmith) SetInfo(i *LangSmithInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i == nil {
		f.info = nil
		return
	}
	f.info, _ = json.Marshal(map[string]any{
		"version": "fake",
		"batch_ingest_config": map[string]any{
			"use_multipart_endpoint": i.UseMultipart, "size_limit": i.SizeLimit, "size_limit_bytes": i.SizeLimitBytes,
		},
	})
}

// DisableMultipart makes /runs/multipart answer 404, as older self-hosted deployments do.
func (f *LangSmith) DisableMultipart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noMultipart = true
}

// Script queues answers for the next ingest requests (after the multipart 404, if any).
// A scripted non-2xx answer does not record the runs.
func (f *LangSmith) Script(rs ...LangSmithResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, rs...)
}

// SetDown makes every ingest request fail with status (e.g. 503) until SetDown(0).
func (f *LangSmith) SetDown(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = status
}

// Runs returns the accepted runs by id: each as first posted, with its patches applied.
func (f *LangSmith) Runs() map[string]map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]map[string]any, len(f.runs))
	for k, v := range f.runs {
		// a copy of each run: a patch replaces its fields while the caller reads them
		out[k] = maps.Clone(v)
	}
	return out
}

// Patches is the number of patches applied to run id (held ones not counted).
func (f *LangSmith) Patches(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.patches[id])
}

// PatchesOf returns the patches applied to run id, in the order applied, each a copy of
// the patch as received (held ones not included until their run is posted).
func (f *LangSmith) PatchesOf(id string) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]map[string]any, 0, len(f.patches[id]))
	for _, p := range f.patches[id] {
		out = append(out, maps.Clone(p))
	}
	return out
}

// PendingPatches is the number of patches held for runs that were never posted.
func (f *LangSmith) PendingPatches() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, ps := range f.pending {
		n += len(ps)
	}
	return n
}

// RunCount is the number of distinct accepted runs.
func (f *LangSmith) RunCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.runs)
}

// Requests returns every ingest request seen.
func (f *LangSmith) Requests() []LangSmithRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]LangSmithRequest(nil), f.requests...)
}

// Violations returns every rule a received run broke, plus tree-level problems: a run
// whose parent_run_id names a run that was received but whose dotted_order does not
// extend the parent's. Call it once all runs arrived.
func (f *LangSmith) Violations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]string(nil), f.violations...)
	for _, id := range f.order {
		r := f.runs[id]
		pid, _ := r["parent_run_id"].(string)
		if pid == "" {
			continue
		}
		p, ok := f.runs[pid]
		if !ok {
			out = append(out, fmt.Sprintf("run %s: parent %s never received", id, pid))
			continue
		}
		pd, _ := p["dotted_order"].(string)
		d, _ := r["dotted_order"].(string)
		if !strings.HasPrefix(d, pd+".") || strings.Count(d, ".") != strings.Count(pd, ".")+1 {
			out = append(out, fmt.Sprintf("run %s: dotted_order %q does not extend parent's %q", id, d, pd))
		}
		if r["trace_id"] != p["trace_id"] {
			out = append(out, fmt.Sprintf("run %s: trace_id %v differs from parent's %v", id, r["trace_id"], p["trace_id"]))
		}
	}
	return out
}

func (f *LangSmith) violate(format string, args ...any) {
	f.violations = append(f.violations, fmt.Sprintf(format, args...))
}

func (f *LangSmith) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/info":
		f.mu.Lock()
		info := f.info
		f.mu.Unlock()
		if info == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(info)
	case r.Method == http.MethodGet && r.URL.Path == "/sessions":
		if !f.authorized(w, r) {
			return
		}
		_, _ = io.WriteString(w, `[]`)
	case r.Method == http.MethodPost && (r.URL.Path == "/runs/multipart" || r.URL.Path == "/runs/batch"):
		f.ingest(w, r)
	case r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, "/runs/"):
		f.updateRun(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *LangSmith) authorized(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("x-api-key") != f.APIKey {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"detail":"Invalid token"}`)
		return false
	}
	return true
}

func (f *LangSmith) ingest(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	f.mu.Lock()
	if r.URL.Path == "/runs/multipart" && f.noMultipart {
		f.requests = append(f.requests, LangSmithRequest{Path: r.URL.Path, Status: http.StatusNotFound})
		f.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	scripted := f.nextScripted()
	f.mu.Unlock()

	body, err := decodeBody(r)
	req := LangSmithRequest{Path: r.URL.Path, Encoding: r.Header.Get("Content-Encoding"), TenantID: r.Header.Get("X-Tenant-Id"), RawBytes: len(body)}
	var ops runOps
	if err == nil {
		if r.URL.Path == "/runs/multipart" {
			ops, err = parseMultipart(r.Header.Get("Content-Type"), body)
		} else {
			ops, err = parseBatch(body)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.refuseBody(w, req, err)
		return
	}
	for _, run := range ops.posts {
		id, _ := run["id"].(string)
		req.RunIDs = append(req.RunIDs, id)
	}
	for _, run := range ops.patches {
		id, _ := run["id"].(string)
		req.PatchIDs = append(req.PatchIDs, id)
	}
	if f.answerScripted(w, req, scripted) {
		return
	}
	var conflicts []string
	for _, run := range ops.posts {
		id, _ := run["id"].(string)
		if _, seen := f.runs[id]; seen {
			conflicts = append(conflicts, id)
			continue
		}
		for _, patch := range f.pending[id] {
			f.applyPatch(run, patch)
		}
		delete(f.pending, id)
		for _, v := range CheckLangSmithRun(run) {
			f.violate("run %v: %s", run["id"], v)
		}
		f.order = append(f.order, id)
		f.runs[id] = run
	}
	for _, patch := range ops.patches {
		id, _ := patch["id"].(string)
		for _, k := range []string{"trace_id", "dotted_order"} {
			if s, _ := patch[k].(string); s == "" {
				f.violate("patch of run %s: missing %s (the batch and multipart endpoints require it)", id, k)
			}
		}
		run, ok := f.runs[id]
		if !ok {
			f.pending[id] = append(f.pending[id], patch)
			continue
		}
		f.applyPatch(run, patch)
		for _, v := range CheckLangSmithRun(run) {
			f.violate("run %v after a patch: %s", id, v)
		}
	}
	if len(conflicts) > 0 {
		req.Status = http.StatusConflict
		f.requests = append(f.requests, req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = fmt.Fprintf(w, `{"detail":"run(s) already exist: %s"}`, strings.Join(conflicts, ", "))
		return
	}
	req.Status = http.StatusAccepted
	f.requests = append(f.requests, req)
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, `{}`)
}

// applyPatch replaces the fields of run that patch carries, each whole. A patch that
// would move the run in its tree (another trace_id, dotted_order or parent) is a violation.
func (f *LangSmith) applyPatch(run, patch map[string]any) {
	id, _ := run["id"].(string)
	for _, k := range []string{"trace_id", "dotted_order", "parent_run_id"} {
		if v, ok := patch[k]; ok && v != run[k] {
			f.violate("patch of run %s changes %s from %v to %v", id, k, run[k], v)
		}
	}
	for k, v := range patch {
		run[k] = v
	}
	f.patches[id] = append(f.patches[id], patch)
}

// runOps are the operations of one ingest request.
type runOps struct {
	posts, patches []map[string]any
}

// nextScripted is the answer SetDown or Script set for the next request, if any; f.mu is
// held.
func (f *LangSmith) nextScripted() *LangSmithResponse {
	switch {
	case f.down != 0:
		return &LangSmithResponse{Status: f.down, Body: "down for the test"}
	case len(f.script) > 0:
		r := &f.script[0]
		f.script = f.script[1:]
		return r
	}
	return nil
}

// answerScripted answers a request with a scripted failure, recording it, and reports
// whether it did; f.mu is held.
func (f *LangSmith) answerScripted(w http.ResponseWriter, req LangSmithRequest, scripted *LangSmithResponse) bool {
	if scripted == nil || scripted.Status/100 == 2 {
		return false
	}
	req.Status = scripted.Status
	f.requests = append(f.requests, req)
	if scripted.RetryAfter != "" {
		w.Header().Set("Retry-After", scripted.RetryAfter)
	}
	w.WriteHeader(scripted.Status)
	_, _ = io.WriteString(w, scripted.Body)
	return true
}

// refuseBody answers a body the service cannot read with 422, recording it and the
// violation; f.mu is held.
func (f *LangSmith) refuseBody(w http.ResponseWriter, req LangSmithRequest, err error) {
	f.violate("%s: %v", req.Path, err)
	req.Status = http.StatusUnprocessableEntity
	f.requests = append(f.requests, req)
	http.Error(w, err.Error(), http.StatusUnprocessableEntity)
}
