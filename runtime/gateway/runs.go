package gateway

import (
	"context"
	"errors"
	"fmt"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
	"github.com/agentmeter/agentmeter/runtime/store"
)

// activeRun is a run this process executes.
type activeRun struct {
	threadID string
	runID    string
	ctx      context.Context
	cancel   context.CancelCauseFunc
	done     chan struct{} // closed when the thread may start its next run
	final    chan struct{} // closed once the run's final row is written
	events   *eventLog
	// prev is the thread's run admitted before this one (nil: none): this run starts
	// when prev is done (one run at a time per thread).
	prev *activeRun
}

// threadLine is the queue of one thread's admitted runs: tail is the newest.
type threadLine struct {
	tail *activeRun
}

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

// errThreadBusy is a rejected run on a busy thread (409).
type errThreadBusy struct{ threadID, runID string }

func (e errThreadBusy) Error() string {
	return fmt.Sprintf("Thread %s already has a run in progress (%s); wait for it to finish, or send multitask_strategy \"enqueue\" to run this one after it", e.threadID, e.runID)
}

// traceContext reads a caller's W3C traceparent/tracestate and baggage headers.
var traceContext = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// maxContextThreads bounds the per-thread context sizes kept for context_usage.
const maxContextThreads = 100_000

// storeTimeout bounds the bookkeeping writes made outside a request (progress,
// completion): they must finish even when the run itself was cancelled.
const storeTimeout = 15 * time.Second

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
	// The caller's trace context (W3C traceparent, tracestate, baggage) is the remote
	// parent of the run's root span, so the run joins the caller's trace.
	remote := traceContext.Extract(context.Background(), propagation.HeaderCarrier(r.Header))
	ar, err := s.admit(run, strategy, remote)
	if err != nil {
		var busy errThreadBusy
		if errors.As(err, &busy) {
			writeError(w, http.StatusConflict, "%v", err)
			return
		}
		writeError(w, http.StatusServiceUnavailable, "%v", err)
		return
	}
	// The files go in only once the run is admitted: a rejected run leaves nothing.
	stored, err := s.storeUploads(p.UserID, threadID, parts)
	if err != nil {
		s.abandon(ar)
		s.internalError(w, "store uploads", err)
		return
	}
	human := message.Human(req.Input)
	if files := append(refs, stored...); len(files) > 0 {
		human.AdditionalKwargs = map[string]any{"files": filesKwarg(files)}
	}
	if err := s.store.CreateRun(r.Context(), run); err != nil {
		s.abandon(ar)
		s.internalError(w, "create run", err)
		return
	}
	go s.execute(ar, run, lead, human)
	if !wait {
		writeJSON(w, http.StatusAccepted, run)
		return
	}
	// done, not final: the answer must find the thread free and the run off the active
	// set, so a client that waited can post the thread's next run at once (final is
	// closed just before the run leaves its thread's line).
	select {
	case <-ar.done:
	case <-r.Context().Done():
		return // the client left; the run goes on
	}
	final, err := s.store.GetRun(r.Context(), run.RunID)
	if err != nil {
		s.internalError(w, "read run", err)
		return
	}
	writeJSON(w, http.StatusOK, final)
}

func isBlank(s string) bool {
	for _, r := range s {
		if r != ' ' && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
	}
	return true
}

// admit registers a run on its thread's line: with reject it fails while the thread has
// a run pending or running; with enqueue the run waits for the thread's earlier runs.
// remote carries the caller's trace context and baggage.
func (s *Server) admit(run store.Run, strategy string, remote context.Context) (*activeRun, error) {
	ctx, cancel := context.WithCancelCause(s.runCtx)
	if sc := trace.SpanContextFromContext(remote); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	if b := baggage.FromContext(remote); b.Len() > 0 {
		ctx = baggage.ContextWithBaggage(ctx, b)
	}
	ar := &activeRun{threadID: run.ThreadID, runID: run.RunID, ctx: ctx, cancel: cancel, done: make(chan struct{}), final: make(chan struct{}), events: newEventLog()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		cancel(errShutdown)
		return nil, errors.New("the gateway is shutting down; no new runs are accepted")
	}
	if line := s.lines[run.ThreadID]; line != nil {
		if strategy != MultitaskEnqueue {
			cancel(nil)
			return nil, errThreadBusy{threadID: run.ThreadID, runID: line.tail.runID}
		}
		ar.prev = line.tail
		line.tail = ar
	} else {
		s.lines[run.ThreadID] = &threadLine{tail: ar}
	}
	s.active[run.RunID] = ar
	s.runsWG.Add(1)
	s.metrics.active.Inc()
	return ar, nil
}

// abandon undoes admit for a run whose row could not be created.
func (s *Server) abandon(ar *activeRun) {
	ar.cancel(nil)
	ar.events.close()
	close(ar.final)
	go func() { // keep the thread's line in order (a run may already wait for this one)
		if ar.prev != nil {
			<-ar.prev.done
		}
		s.release(ar)
		close(ar.done)
	}()
}

// release takes a finished run off its thread's line and the active set.
func (s *Server) release(ar *activeRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if line := s.lines[ar.threadID]; line != nil && line.tail == ar {
		delete(s.lines, ar.threadID)
	}
	delete(s.active, ar.runID)
	s.metrics.active.Dec()
	s.runsWG.Done()
}

// streamObserver forwards the lead agent's model responses to the run's event log as
// they complete, and tracks the thread's context size. Subagent calls never reach it
// (the executor isolates observers); middleware calls are not conversation messages.
type streamObserver struct {
	s        *Server
	ar       *activeRun
	cum      *usageSum
	threadID string
}

// usageSum is the cumulative usage of the streamed AI messages (the end event's usage,
// A17): missing keys count as zero and total is never derived.
type usageSum struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

func (o streamObserver) ObserveModelCall(_ context.Context, rec model.CallRecord) {
	if rec.Response == nil || genai.CallerBucket(rec.Caller) != genai.BucketLeadAgent {
		return
	}
	msg := rec.Response.Message
	if u := msg.UsageMetadata; u != nil {
		o.s.mu.Lock()
		o.cum.InputTokens += u.InputTokens
		o.cum.OutputTokens += u.OutputTokens
		o.cum.TotalTokens += u.TotalTokens
		if _, known := o.s.context[o.threadID]; !known && len(o.s.context) >= maxContextThreads {
			for k := range o.s.context { // bounded memory: forget an arbitrary thread
				delete(o.s.context, k)
				break
			}
		}
		o.s.context[o.threadID] = contextTokens{tokens: u.InputTokens + u.OutputTokens, model: msg.ModelName()}
		o.s.mu.Unlock()
	}
	o.ar.events.publish("messages", msg)
}

func (s *Server) execute(ar *activeRun, run store.Run, lead Lead, human message.Message) {
	ctx := ar.ctx
	defer func() {
		s.release(ar)
		close(ar.done) // after release: the next run of the thread may start now
	}()
	defer ar.events.close()
	defer ar.cancel(nil)
	bg := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), storeTimeout)
	}
	ar.events.publish("metadata", map[string]string{"run_id": run.RunID, "thread_id": run.ThreadID})

	// One run at a time per thread: a queued run stays pending until the thread's
	// previous run is done (it saved the state this one continues).
	if ar.prev != nil {
		select {
		case <-ar.prev.done:
		case <-ctx.Done():
		}
		if ctx.Err() == nil && s.closing.Load() {
			ar.cancel(errShutdown)
		}
		if ctx.Err() != nil {
			c := store.Completion{Status: store.StatusInterrupted, Error: errCancelled.Error()}
			if errors.Is(context.Cause(ctx), errShutdown) {
				c.Error = errShutdown.Error()
			}
			s.finish(ar, run, c, time.Now(), journal.CompletionData{}, &usageSum{})
			// The thread's line stays in order: the run after this one must still wait
			// for the run before it.
			<-ar.prev.done
			return
		}
	}
	start := time.Now()
	if s.cfg.RunTimeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, s.cfg.RunTimeout)
		defer stop()
	}
	{
		c, cancel := bg()
		_, err := s.store.MarkRunning(c, run.RunID)
		cancel()
		if err != nil {
			s.log.Error("gateway: mark run running", "run_id", run.RunID, "error", err)
		}
	}
	var (
		prior   *state.State
		version int64
	)
	if s.cfg.history() {
		c, cancel := bg()
		st, v, err := s.store.LoadThreadState(c, run.ThreadID)
		version = v
		cancel()
		if err != nil {
			s.log.Error("gateway: load thread state", "thread_id", run.ThreadID, "error", err)
			s.finish(ar, run, store.Completion{Status: store.StatusError, Error: "load thread state failed"}, start, journal.CompletionData{}, &usageSum{})
			return
		}
		prior = &st
	}
	j := journal.New(journal.Options{
		RunID: run.RunID, ThreadID: run.ThreadID, ProgressInterval: s.cfg.ProgressInterval, Pricer: s.pricer,
		ProgressReporter: func(snap journal.CompletionData) {
			c, cancel := bg()
			defer cancel()
			if _, err := s.store.UpdateRunProgress(c, run.RunID, snap); err != nil {
				s.log.Warn("gateway: progress snapshot", "run_id", run.RunID, "error", err)
			}
		},
	})
	cum := &usageSum{}
	runCtx := model.WithObserver(ctx, streamObserver{s: s, ar: ar, cum: cum, threadID: run.ThreadID})
	sb, err := s.runSandbox(lead.Sandbox, run.UserID, run.ThreadID)
	if err != nil {
		s.log.Error("gateway: mount the thread's uploads", "thread_id", run.ThreadID, "error", err)
		s.finish(ar, run, store.Completion{Status: store.StatusError, Error: "mount the thread's uploads failed"}, start, journal.CompletionData{}, &usageSum{})
		return
	}
	res, runErr := lead.Agent.Run(runCtx, agent.Input{
		ThreadID: run.ThreadID, RunID: run.RunID, UserID: run.UserID, Journal: j, Sandbox: sb,
		State: prior, Context: s.threadBaseline(run.ThreadID, run.UserID),
		Messages: []message.Message{human},
		Emit:     func(event string, payload map[string]any) { ar.events.publish(event, payload) },
	})
	j.Flush()
	data := j.CompletionData()

	c := store.Completion{Status: store.StatusSuccess, Usage: data}
	switch cause := context.Cause(ctx); {
	case runErr == nil:
		if detail, failed := j.ErrorFallback(); failed {
			c.Status, c.Error = store.StatusError, detail // §5.5: a fallback answer finalises as error
		}
	case errors.Is(cause, errCancelled):
		c.Status, c.Error = store.StatusInterrupted, errCancelled.Error()
	case errors.Is(cause, errShutdown):
		c.Status, c.Error = store.StatusInterrupted, errShutdown.Error()
	case errors.Is(cause, context.DeadlineExceeded) || errors.Is(runErr, context.DeadlineExceeded):
		c.Status, c.Error = store.StatusTimeout, fmt.Sprintf("run exceeded gateway.run_timeout (%s)", s.cfg.RunTimeout)
	default:
		c.Status, c.Error = store.StatusError, runErr.Error()
	}
	if res != nil {
		c.StopReason = res.StopReason
		if res.TraceID != "" && res.TraceID != "00000000000000000000000000000000" {
			c.TraceID = res.TraceID
		}
		had := priorIDs(prior)
		for _, m := range res.State.Messages {
			if m.Role == message.RoleTool && !had[m.ID] {
				ar.events.publish("messages", m)
			}
		}
		if s.cfg.history() {
			if c.Status == store.StatusInterrupted {
				s.titleInterrupted(&res.State)
			}
			// Whatever the outcome, the thread keeps what the run did (DeerFlow's
			// checkpoints); the next run's DanglingToolCall patches an interrupted turn.
			cctx, cancel := bg()
			_, err := s.store.SaveThreadState(cctx, run.ThreadID, res.State, version)
			cancel()
			if err != nil {
				s.log.Error("gateway: save thread state", "thread_id", run.ThreadID, "run_id", run.RunID, "error", err)
			}
		}
	}
	{
		cctx, cancel := bg()
		err := s.store.AppendRunEvents(cctx, run.RunID, run.ThreadID, j.Events())
		cancel()
		if err != nil {
			s.log.Error("gateway: persist run events", "run_id", run.RunID, "error", err)
		}
	}
	s.finish(ar, run, c, start, data, cum)
}

// finish persists a run's completion, counts it and publishes its end event.
func (s *Server) finish(ar *activeRun, run store.Run, c store.Completion, start time.Time, data journal.CompletionData, cum *usageSum) {
	{
		cctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		changed, err := s.store.UpdateRunCompletion(cctx, run.RunID, c)
		cancel()
		if err != nil {
			s.log.Error("gateway: persist run completion", "run_id", run.RunID, "error", err)
		} else if !changed {
			s.log.Warn("gateway: run completion not written (status guard)", "run_id", run.RunID, "status", c.Status)
		}
	}
	s.metrics.runFinished(c.Status, time.Since(start), data)
	end := map[string]any{"run_id": run.RunID, "status": c.Status, "usage": cum,
		"token_usage": map[string]int64{"total_tokens": data.TotalTokens, "total_input_tokens": data.TotalInputTokens, "total_output_tokens": data.TotalOutputTokens}}
	if c.Error != "" {
		end["error"] = c.Error
	}
	if c.TraceID != "" {
		end["trace_id"] = c.TraceID
	}
	ar.events.publish("end", end)
	close(ar.final)

	s.mu.Lock()
	s.recent[run.RunID] = ar
	s.order = append(s.order, run.RunID)
	if len(s.order) > maxRecentRuns {
		delete(s.recent, s.order[0])
		s.order = s.order[1:]
	}
	s.mu.Unlock()
}

func (s *Server) lookup(runID string) *activeRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ar := s.active[runID]; ar != nil {
		return ar
	}
	return s.recent[runID]
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request, p Principal) {
	run, ok := s.findRun(w, r, p)
	if !ok {
		return
	}
	s.mu.Lock()
	ar := s.active[run.RunID]
	s.mu.Unlock()
	if ar == nil {
		if run.Status.Final() {
			writeError(w, http.StatusConflict, "Run %s already finished with status %s", run.RunID, run.Status)
			return
		}
		writeError(w, http.StatusConflict, "Run %s is not executing in this gateway", run.RunID)
		return
	}
	ar.cancel(errCancelled)
	select {
	case <-ar.final:
	case <-time.After(10 * time.Second):
	case <-r.Context().Done():
		return
	}
	final, err := s.store.GetRun(r.Context(), run.RunID)
	if err != nil {
		s.internalError(w, "read run", err)
		return
	}
	writeJSON(w, http.StatusAccepted, final)
}

// streamRun sends the run's events as Server-Sent Events: metadata, messages (AI
// messages with usage_metadata as they complete, tool messages at the end), the task_*
// events of subagents with their usage, and end (status, cumulative usage). A run no
// longer in memory (finished before a restart) gets just its end event.
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request, p Principal) {
	run, ok := s.findRun(w, r, p)
	if !ok {
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming is not supported by this connection")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ar := s.lookup(run.RunID)
	if ar == nil {
		// Not executing here (finished before a restart, or running on another replica
		// sharing the database): wait for a final status, then send its end event.
		poll := time.NewTicker(500 * time.Millisecond)
		defer poll.Stop()
		for !run.Status.Final() {
			select {
			case <-r.Context().Done():
				return
			case <-poll.C:
			}
			if ar = s.lookup(run.RunID); ar != nil {
				break
			}
			latest, err := s.store.GetRun(r.Context(), run.RunID)
			if err != nil {
				s.log.Warn("gateway: stream: read run", "run_id", run.RunID, "error", err)
				return
			}
			run = latest
		}
	}
	if ar == nil {
		log := newEventLog()
		log.publish("end", map[string]any{"run_id": run.RunID, "status": run.Status, "error": run.Error,
			"token_usage": map[string]int64{"total_tokens": run.Usage.TotalTokens, "total_input_tokens": run.Usage.TotalInputTokens, "total_output_tokens": run.Usage.TotalOutputTokens}})
		log.close()
		ar = &activeRun{events: log}
	}
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	next := 0
	for {
		evs, closed, changed := ar.events.read(next)
		for _, e := range evs {
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Name, e.Data); err != nil {
				return
			}
		}
		next += len(evs)
		flusher.Flush()
		if closed && len(evs) == 0 {
			return
		}
		if len(evs) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-keepalive.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case <-r.Context().Done():
			return
		}
	}
}

// Shutdown stops accepting requests and runs, lets running runs finish until ctx ends,
// then cancels the rest: they are persisted as interrupted (with their counters so far),
// and any row still pending or running is marked interrupted as a backstop. Streams end
// with their runs. It returns after the store writes; the caller closes the store.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing.Store(true) // under mu: start never adds to runsWG after this
	srv := s.httpSrv
	s.mu.Unlock()
	httpDone := make(chan error, 1)
	if srv != nil {
		go func() { httpDone <- srv.Shutdown(ctx) }()
	} else {
		httpDone <- nil
	}
	runsDone := make(chan struct{})
	go func() { s.runsWG.Wait(); close(runsDone) }()
	select {
	case <-runsDone:
	case <-ctx.Done():
		s.mu.Lock()
		n := len(s.active)
		s.mu.Unlock()
		s.log.Warn("gateway: shutdown deadline reached; interrupting runs", "runs", n)
		s.cancelAll(errShutdown)
		select {
		case <-runsDone:
		case <-time.After(storeTimeout):
		}
	}
	// Backstop: whatever is still registered (a run goroutine stuck past the grace
	// period) is marked interrupted so no row stays running forever.
	s.mu.Lock()
	var left []string
	for id := range s.active {
		left = append(left, id)
	}
	s.mu.Unlock()
	var errs []error
	if len(left) > 0 {
		c, cancel := context.WithTimeout(context.Background(), storeTimeout)
		if _, err := s.store.InterruptRuns(c, left, errShutdown.Error()); err != nil {
			errs = append(errs, fmt.Errorf("gateway: interrupt runs: %w", err))
		}
		cancel()
	}
	if err := <-httpDone; err != nil && srv != nil {
		_ = srv.Close() // streams of runs that ended have returned; close the rest
	}
	s.cancelAll(errShutdown)
	return errors.Join(errs...)
}

// priorIDs are the ids of the messages the thread had before the run.
func priorIDs(prior *state.State) map[string]bool {
	if prior == nil {
		return nil
	}
	ids := make(map[string]bool, len(prior.Messages))
	for _, m := range prior.Messages {
		ids[m.ID] = true
	}
	return ids
}

// runEventsResponse is the body of GET .../runs/{run_id}/events.
type runEventsResponse struct {
	RunID  string           `json:"run_id"`
	Events []store.RunEvent `json:"events"`
}

// runEvents serves the run's persisted journal events (middleware audit such as
// middleware:safety_termination and middleware:guardrail, lifecycle, llm.error, model
// responses), in order. They are written when the run ends; a running run has none yet.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request, p Principal) {
	run, ok := s.findRun(w, r, p)
	if !ok {
		return
	}
	evs, err := s.store.ListRunEvents(r.Context(), run.RunID)
	if err != nil {
		s.internalError(w, "list run events", err)
		return
	}
	writeJSON(w, http.StatusOK, runEventsResponse{RunID: run.RunID, Events: evs})
}

// threadStateResponse is the body of GET /api/threads/{id}/state (LangGraph's thread
// state: the channels under values).
type threadStateResponse struct {
	ThreadID string      `json:"thread_id"`
	Values   state.State `json:"values"`
}

// threadState serves the state the thread's last run left: what the next run continues.
func (s *Server) threadState(w http.ResponseWriter, r *http.Request, p Principal) {
	id := r.PathValue("thread_id")
	_, exists, ok := s.checkOwner(w, r, p, id)
	if !ok {
		return
	}
	if !exists {
		writeError(w, http.StatusNotFound, "Thread %s not found", id)
		return
	}
	st, _, err := s.store.LoadThreadState(r.Context(), id)
	if err != nil {
		s.internalError(w, "load thread state", err)
		return
	}
	if st.Messages == nil {
		st.Messages = []message.Message{}
	}
	writeJSON(w, http.StatusOK, threadStateResponse{ThreadID: id, Values: st})
}

// threadBaseline is a run context carrying what the thread's earlier runs used (tokens,
// and cost from their stored per-model cost), so a thread budget middleware counts the
// whole thread, not only this run. A store error leaves the baseline at zero (logged):
// the budget then counts this run only, it never blocks it.
func (s *Server) threadBaseline(threadID, userID string) *agent.RunContext {
	rc := agent.NewRunContext()
	c, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	u, err := s.store.AggregateTokensByThread(c, threadID, false)
	if err != nil {
		s.log.Warn("gateway: thread usage for the budget baseline", "thread_id", threadID, "error", err)
		return rc
	}
	b := journal.ThreadBaseline{Tokens: u.TotalTokens, CostUSD: u.TotalCostUSD}
	if userID != "" {
		if uu, err := s.store.AggregateTokensByUser(c, userID, false); err != nil {
			s.log.Warn("gateway: user usage for the budget baseline", "user_id", userID, "error", err)
		} else {
			b.UserTokens, b.UserCostUSD = uu.TotalTokens, uu.TotalCostUSD
		}
	}
	rc.Set(journal.BaselineContextKey, b)
	return rc
}

// titleInterrupted gives an untitled thread whose only user message is the interrupted
// run's a fallback title (DeerFlow's worker: a partial first exchange is titled too).
func (s *Server) titleInterrupted(st *state.State) {
	if s.fallbackTitle == nil || st.Title != "" {
		return
	}
	user, n := "", 0
	for _, m := range st.Messages {
		if !m.IsHuman() {
			continue
		}
		if hidden, _ := m.AdditionalKwargs["hide_from_ui"].(bool); hidden {
			continue
		}
		n++
		user = m.Content
		if orig, ok := m.AdditionalKwargs["original_user_content"].(string); ok {
			user = orig
		}
	}
	if n == 1 {
		st.Title = s.fallbackTitle(user)
	}
}
