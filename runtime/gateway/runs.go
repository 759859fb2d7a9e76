package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/store"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
)

type createRunRequest struct {
	// Input is the human message of the run.
	Input string `json:"input"`
	// MultitaskStrategy overrides gateway.multitask_strategy for this run: reject or
	// enqueue.
	MultitaskStrategy string `json:"multitask_strategy"`
	// Files names files already uploaded to the thread (POST .../uploads); a multipart
	// request carries its files instead.
	Files []fileRef `json:"files"`
}

// busyMessage is the 409 of a rejected run on a busy thread.
func busyMessage(threadID, runID string) string {
	return fmt.Sprintf("Thread %s already has a run in progress (%s); wait for it to finish, or send multitask_strategy \"enqueue\" to run this one after it", threadID, runID)
}

// traceContext reads a caller's W3C traceparent/tracestate and baggage headers.
var traceContext = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// cancelWait bounds how long a cancel request waits for the run's final row.
const cancelWait = 10 * time.Second

// createRun admits a run on its thread's line in the store (409 with reject while the
// thread has a run in progress on any gateway sharing the store), then tries to start
// it here at once; otherwise whichever gateway is free starts it in its turn.
func (s *Server) createRun(w http.ResponseWriter, r *http.Request, p Principal) {
	threadID := r.PathValue("thread_id")
	wait := false
	if v := r.URL.Query().Get("wait"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "wait must be true or false, got %q", v)
			return
		}
		wait = b
	}
	var (
		req   createRunRequest
		parts []*multipart.FileHeader
	)
	if isMultipart(r) {
		// Multipart: fields input and multitask_strategy, files in "files".
		form, ok := s.parseMultipart(w, r)
		if !ok {
			return
		}
		defer form.RemoveAll() //nolint:errcheck // temp files of the parsed body
		for k, v := range form.Value {
			switch k {
			case "input":
				req.Input = strings.Join(v, "\n")
			case "multitask_strategy":
				req.MultitaskStrategy = v[0]
			default:
				writeError(w, http.StatusBadRequest, "unknown form field %q (input, multitask_strategy, files)", k)
				return
			}
		}
		parts = form.File["files"]
		if len(parts) > 0 && s.uploads == nil {
			writeError(w, http.StatusNotImplemented, "uploads are not configured on this gateway")
			return
		}
	} else if !s.decodeBody(w, r, &req, false) {
		return
	}
	if req.MultitaskStrategy != "" && !validStrategy(req.MultitaskStrategy) {
		writeError(w, http.StatusBadRequest, "multitask_strategy %q must be reject or enqueue", req.MultitaskStrategy)
		return
	}
	if n := len([]rune(req.Input)); n > s.cfg.MaxPromptChars {
		writeError(w, http.StatusRequestEntityTooLarge, "input is %d characters; the limit is %d (gateway.max_prompt_chars)", n, s.cfg.MaxPromptChars)
		return
	}
	if isBlank(req.Input) {
		writeError(w, http.StatusBadRequest, "input is required: a non-empty string")
		return
	}
	if s.closing.Load() {
		writeError(w, http.StatusServiceUnavailable, "the gateway is shutting down; no new runs are accepted")
		return
	}
	// A run on an unknown thread creates it, owned by the caller.
	if !s.ensureThread(w, r, p, threadID) {
		return
	}
	refs, err := s.referencedUploads(p.UserID, threadID, req.Files)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	strategy := req.MultitaskStrategy
	if strategy == "" {
		strategy = s.cfg.MultitaskStrategy
	}
	lead, err := s.agents(r.Context(), threadID)
	if err != nil {
		s.internalError(w, "build agent", err)
		return
	}
	run := store.Run{RunID: newID("run-"), ThreadID: threadID, UserID: p.UserID, Status: store.StatusPending,
		ModelName: lead.ModelName, CreatedAt: time.Now().UTC()}
	// The caller's trace context (W3C traceparent, tracestate, baggage) travels with the
	// run to the gateway executing it: the run's root span is its child. So does the
	// placement of the caller's LangSmith run (langsmith-trace, from LangSmith's SDKs),
	// under which LangSmith shows the run's runs as they go.
	carrier := propagation.MapCarrier{}
	traceContext.Inject(traceContext.Extract(context.Background(), propagation.HeaderCarrier(r.Header)), carrier)
	if v := telemetry.CallerPlacement(r.Header.Get(telemetry.LangSmithTraceHeader)); v != "" {
		carrier[telemetry.LangSmithTraceHeader] = v
	}
	if len(carrier) > 0 {
		run.TraceCarrier = carrier
	}
	human := message.Human(req.Input)
	if len(parts) == 0 {
		if run.Input, err = encodeInput(human, refs); err != nil {
			s.internalError(w, "encode run input", err)
			return
		}
	}
	// With files the run is admitted not ready: it holds its place in the line (so a
	// rejected run stores nothing), and no gateway starts it before its files are in.
	err = s.store.AdmitRun(r.Context(), run, strategy == MultitaskEnqueue, s.owner, time.Now().Add(s.cfg.LeaseTimeout))
	var busy *store.BusyError
	switch {
	case errors.As(err, &busy):
		writeError(w, http.StatusConflict, "%s", busyMessage(threadID, busy.RunID))
		return
	case err != nil:
		s.internalError(w, "admit run", err)
		return
	}
	if len(parts) > 0 && !s.readyWithFiles(w, r, run, human, refs, parts) {
		return
	}
	s.claimRuns(store.ClaimFilter{RunID: run.RunID})
	if !wait {
		writeJSON(w, http.StatusAccepted, run)
		return
	}
	final, err := s.awaitFinal(r.Context(), run.RunID)
	if err != nil {
		if r.Context().Err() == nil {
			s.internalError(w, "read run", err)
		}
		return // the client left; the run goes on
	}
	writeJSON(w, http.StatusOK, final)
}

// readyWithFiles stores an admitted run's files in the thread's uploads and makes the
// run ready; a failure ends the run as error.
func (s *Server) readyWithFiles(w http.ResponseWriter, r *http.Request, run store.Run, human message.Message, refs []UploadedFile, parts []*multipart.FileHeader) bool {
	fail := func(what string, err error) bool {
		c, cancel := context.WithTimeout(context.Background(), storeTimeout)
		if _, cerr := s.store.UpdateRunCompletion(c, run.RunID, store.Completion{Status: store.StatusError, Error: what + " failed"}); cerr != nil {
			s.log.Error("gateway: end a run whose files were not stored", "run_id", run.RunID, "error", cerr)
		}
		cancel()
		s.internalError(w, what, err)
		return false
	}
	stored, err := s.storeUploads(run.UserID, run.ThreadID, parts)
	if err != nil {
		return fail("store uploads", err)
	}
	input, err := encodeInput(human, append(refs, stored...))
	if err != nil {
		return fail("encode run input", err)
	}
	if _, err := s.store.SetRunInput(r.Context(), run.RunID, input); err != nil {
		return fail("set run input", err)
	}
	return true
}

// encodeInput is the run's human message, with its files, as stored for the gateway
// that executes it.
func encodeInput(human message.Message, files []UploadedFile) (string, error) {
	if len(files) > 0 {
		human.AdditionalKwargs = map[string]any{"files": filesKwarg(files)}
	}
	b, err := json.Marshal(human)
	if err != nil {
		return "", fmt.Errorf("encode run input: %w", err)
	}
	return string(b), nil
}

func isBlank(s string) bool {
	for _, r := range s {
		if r != ' ' && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
	}
	return true
}

// cancelRun cancels a run wherever it is: one executing here directly; a queued one in
// the store; one executing on another gateway through the store's cancel flag, which
// that gateway reads at its next lease renewal. It answers with the final row.
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request, p Principal) {
	run, ok := s.findRun(w, r, p)
	if !ok {
		return
	}
	if !s.cancelHere(run.RunID) {
		out, err := s.store.RequestCancel(r.Context(), run.RunID, errCancelled.Error())
		if err != nil {
			s.internalError(w, "cancel run", err)
			return
		}
		switch out {
		case store.CancelNotFound:
			writeError(w, http.StatusNotFound, "Run %s not found", run.RunID)
			return
		case store.CancelTooLate:
			latest, err := s.store.GetRun(r.Context(), run.RunID)
			if err != nil {
				s.internalError(w, "read run", err)
				return
			}
			writeError(w, http.StatusConflict, "Run %s already finished with status %s", run.RunID, latest.Status)
			return
		case store.CancelledPending:
			s.notify(run.RunID)
		case store.CancelRequested:
			s.cancelHere(run.RunID) // claimed here since the first look
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), cancelWait)
	defer cancel()
	final, err := s.awaitFinal(ctx, run.RunID)
	if err != nil && r.Context().Err() != nil {
		return
	}
	if err != nil { // not final within cancelWait: answer with the row as it is
		if final, err = s.store.GetRun(r.Context(), run.RunID); err != nil {
			s.internalError(w, "read run", err)
			return
		}
	}
	writeJSON(w, http.StatusAccepted, final)
}

// cancelHere cancels the run if this process executes it.
func (s *Server) cancelHere(runID string) bool {
	if ar := s.activeRun(runID); ar != nil {
		ar.cancel(errCancelled)
		return true
	}
	return false
}
