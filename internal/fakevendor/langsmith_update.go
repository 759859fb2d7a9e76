package fakevendor

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// updateRun is PATCH /runs/{id}: one run's update as JSON, which LangSmith places itself
// from the run it holds, so trace_id and dotted_order are not needed (an update that
// names others than the run's is a violation, as a multipart patch's is). An update of a
// run not posted yet is held until its post, as a multipart patch is; scripted responses
// and SetDown apply as to ingest requests.
func (f *LangSmith) updateRun(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	id := strings.TrimPrefix(r.URL.Path, "/runs/")
	f.mu.Lock()
	scripted := f.nextScripted()
	f.mu.Unlock()

	body, err := io.ReadAll(r.Body)
	var patch map[string]any
	if err == nil {
		err = json.Unmarshal(body, &patch)
	}
	req := LangSmithRequest{Path: r.URL.Path, Encoding: r.Header.Get("Content-Encoding"), TenantID: r.Header.Get("X-Tenant-Id"), RawBytes: len(body), PatchIDs: []string{id}}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.refuseBody(w, req, err)
		return
	}
	if f.answerScripted(w, req, scripted) {
		return
	}
	if pid, ok := patch["id"].(string); ok && pid != id {
		f.violate("PATCH %s carries id %s", r.URL.Path, pid)
	}
	if run, ok := f.runs[id]; ok {
		f.applyPatch(run, patch)
		for _, v := range CheckLangSmithRun(run) {
			f.violate("run %v after an update: %s", id, v)
		}
	} else {
		f.pending[id] = append(f.pending[id], patch) // ingestion is asynchronous, as a multipart patch's
	}
	req.Status = http.StatusOK
	f.requests = append(f.requests, req)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{}`)
}
