package agentusage

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/langfuse"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/langsmith"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/native"
)

func (r *usageReceiver) handleNative(w http.ResponseWriter, req *http.Request) {
	body, ok := readBody(w, req)
	if !ok {
		return
	}
	res, err := native.Decode(body, r.now())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	resp := map[string]any{"accepted": res.Accepted, "rejected": len(res.Errors), "errors": nonNil(res.Errors)}
	if res.Accepted == 0 && len(res.Errors) > 0 {
		writeJSON(w, http.StatusBadRequest, resp)
		return
	}
	if err := r.consume(req.Context(), res.Traces, formatNative); err != nil {
		r.writeRefused(w, err, http.StatusServiceUnavailable)
		return
	}
	status := http.StatusOK
	if len(res.Errors) > 0 {
		status = http.StatusMultiStatus
	}
	writeJSON(w, status, resp)
}

func (r *usageReceiver) handleRunPost(w http.ResponseWriter, req *http.Request) {
	body, ok := readBody(w, req)
	if !ok {
		return
	}
	op, err := langsmith.DecodeRun(body, false, "")
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	r.ingestRuns(w, req, []langsmith.Op{op}, nil)
}

func (r *usageReceiver) handleRunPatch(w http.ResponseWriter, req *http.Request) {
	body, ok := readBody(w, req)
	if !ok {
		return
	}
	op, err := langsmith.DecodeRun(body, true, req.PathValue("id"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	r.ingestRuns(w, req, []langsmith.Op{op}, nil)
}

func (r *usageReceiver) handleRunBatch(w http.ResponseWriter, req *http.Request) {
	// read into a recycled buffer sized from Content-Length (as for multipart): the
	// ops point into it until the request is done
	ops, errs, release, err := langsmith.DecodeBatchPooled(req.Body, r.bodyHint(req))
	defer release()
	r.ingestDecoded(w, req, ops, errs, err)
}

func (r *usageReceiver) handleRunMultipart(w http.ResponseWriter, req *http.Request) {
	ops, errs, release, err := langsmith.DecodeMultipartPooled(req.Header.Get("Content-Type"), req.Body, r.bodyHint(req))
	defer release() // the ops point into the read buffer until the request is done
	r.ingestDecoded(w, req, ops, errs, err)
}

// ingestDecoded ingests what a LangSmith decoder read, or answers its error: 400 for a
// body that is not a batch, the read error's status otherwise (413 past the limit).
func (r *usageReceiver) ingestDecoded(w http.ResponseWriter, req *http.Request, ops []langsmith.Op, errs []langsmith.ItemError, err error) {
	if err != nil {
		if errors.Is(err, langsmith.ErrBody) {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		} else {
			writeReadError(w, err)
		}
		return
	}
	r.ingestRuns(w, req, ops, errs)
}

// ingestRuns plans, emits and commits LangSmith run operations. LangSmith itself
// answers a batch all-or-nothing; we keep the good runs of a batch with bad items and
// say which were refused (207), because dropping valid usage for a bad neighbour loses
// tokens for good.
func (r *usageReceiver) ingestRuns(w http.ResponseWriter, req *http.Request, ops []langsmith.Op, errs []langsmith.ItemError) {
	if len(ops) == 0 && len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "no valid runs in the request", "errors": errs})
		return
	}
	// what each run's span needs from the run alone is read before the lock: only
	// placing runs against the shared stores has to go one request at a time
	prep := langsmith.Prepare(ops)
	defer prep.Release() // after the spans are built and the plan committed
	if status, err := r.placeRuns(req.Context(), ops); err != nil {
		r.writeRefused(w, err, status)
		return
	}
	resp := map[string]any{"accepted": len(ops), "errors": nonNil(errs)}
	if len(errs) > 0 {
		writeJSON(w, http.StatusMultiStatus, resp)
		return
	}
	writeJSON(w, http.StatusAccepted, resp)
}

// placeRuns places a request's runs against the held ones and sends what goes on, one
// request at a time. The lock is released by defer: a panic answered by the server's
// recoverer must not leave the face locked for every later request, the flush and
// Shutdown.
func (r *usageReceiver) placeRuns(reqCtx context.Context, ops []langsmith.Op) (int, error) {
	r.runsMu.Lock()
	defer r.runsMu.Unlock()
	plan := r.runs.Plan(ops)
	defer plan.Release()
	return placeHeld(reqCtx, r, r.runFace(), plan.Park, plan.Build, plan.Commit, http.StatusServiceUnavailable, plan.Complete, plan.Evict)
}

func (r *usageReceiver) handleLangfuseOTLP(w http.ResponseWriter, req *http.Request) {
	body, ok := readBody(w, req)
	if !ok {
		return
	}
	td, err := langfuse.DecodeOTLP(req.Header.Get("Content-Type"), body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	if err := r.consume(req.Context(), td, formatLFOTLP); err != nil {
		r.writeRefused(w, err, http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

// handleLangfuseIngestion answers like Langfuse: 207 with per-event successes and
// errors for a well-formed batch, 400 when the body is not a batch at all.
func (r *usageReceiver) handleLangfuseIngestion(w http.ResponseWriter, req *http.Request) {
	body, ok := readBody(w, req)
	if !ok {
		return
	}
	events, errs, err := langfuse.DecodeIngestion(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid request data", "errors": []string{err.Error()}})
		return
	}
	if status, err := r.placeObservations(req.Context(), events); err != nil {
		r.writeRefused(w, err, status)
		return
	}
	resp := langfuse.Response{Successes: []langfuse.Success{}, Errors: nonNil(errs)}
	for _, ev := range events {
		resp.Successes = append(resp.Successes, langfuse.Success{ID: ev.ID, Status: http.StatusCreated})
	}
	writeJSON(w, http.StatusMultiStatus, resp)
}

// placeObservations is placeRuns for Langfuse's ingestion events (a refusal of the
// pipeline is Langfuse's 429).
func (r *usageReceiver) placeObservations(reqCtx context.Context, events []langfuse.Event) (int, error) {
	r.eventsMu.Lock()
	defer r.eventsMu.Unlock()
	plan := r.lfEvents.Plan(events)
	return placeHeld(reqCtx, r, r.observationFace(), slices.Concat(plan.Park, plan.Roots), plan.Build, plan.Commit, http.StatusTooManyRequests, plan.Complete, plan.Evict)
}

// placeHeld sends what a face's plan lets go on, with storage around the send (called
// under the face's lock). The items held from now on are on disk before anything of the
// request goes on: a failed write is a 503 with nothing sent, so the SDK's retry sends
// nothing twice. A refusal of the pipeline (refusedStatus) takes them off again; once the
// request went on, the plan is committed and what left the store (gone) leaves the disk.
func placeHeld[T any](reqCtx context.Context, r *usageReceiver, f heldFace[T], held []T, build func() ptrace.Traces,
	commit func(time.Time), refusedStatus int, gone ...[]T) (int, error) {
	ctx := context.WithoutCancel(reqCtx)
	if err := f.disk.write(ctx, held); err != nil {
		r.set.Logger.Error("agentusage: storing held entries failed; answering 503", zap.String("face", f.name), zap.Error(err))
		return http.StatusServiceUnavailable, err
	}
	if err := r.consume(reqCtx, build(), f.format); err != nil {
		f.disk.undo(ctx, held)
		return refusedStatus, err
	}
	commit(r.now())
	f.disk.remove(ctx, gone...)
	return 0, nil
}
