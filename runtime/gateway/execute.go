package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
	"github.com/agentmeter/agentmeter/runtime/store"
)

// maxContextThreads bounds the per-thread context sizes kept for context_usage.
const maxContextThreads = 100_000

// storeTimeout bounds the bookkeeping writes made outside a request (progress,
// completion): they must finish even when the run itself was cancelled.
const storeTimeout = 15 * time.Second

// streamObserver forwards the lead agent's model responses to the run's event log as
// they complete, and tracks the thread's context size. Subagent calls never reach it
// (the executor isolates observers); middleware calls are not conversation messages.
type streamObserver struct {
	s        *Server
	ar       *activeRun
	cum      *usageSum
	threadID string
}

// usageSum is the cumulative usage of the streamed AI messages (the end event's usage, as
// DeerFlow's embedded client sums it): missing keys count as zero and total is never derived.
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

// execute runs a claimed run: it loads the thread's state, runs the lead agent on the
// run's stored input, saves the state (only if no one saved it since the load), stores
// the journal's events and finalises the row, which frees the thread.
func (s *Server) execute(ar *activeRun, run store.Run) {
	ctx := ar.ctx
	defer s.release(ar)
	defer ar.events.close()
	defer ar.cancel(nil)
	bg := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), storeTimeout)
	}
	ar.events.publish("metadata", map[string]string{"run_id": run.RunID, "thread_id": run.ThreadID})
	start := time.Now()
	fail := func(detail string) {
		s.finish(ar, run, store.Completion{Status: store.StatusError, Error: detail}, start, journal.CompletionData{}, &usageSum{})
	}
	var human message.Message
	if err := json.Unmarshal([]byte(run.Input), &human); err != nil {
		s.log.Error("gateway: decode the run's input", "run_id", run.RunID, "error", err)
		fail("the run's stored input is not a message")
		return
	}
	lead, err := s.agents(ctx, run.ThreadID)
	if err != nil {
		s.log.Error("gateway: build agent", "run_id", run.RunID, "error", err)
		fail("build agent failed")
		return
	}
	if s.cfg.RunTimeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, s.cfg.RunTimeout)
		defer stop()
	}
	var (
		prior   *state.State
		version int64
	)
	if s.cfg.history() {
		c, cancel := bg()
		st, v, err := s.store.LoadThreadState(c, run.ThreadID)
		cancel()
		if err != nil {
			s.log.Error("gateway: load thread state", "thread_id", run.ThreadID, "error", err)
			fail("load thread state failed")
			return
		}
		prior, version = &st, v
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
		fail("mount the thread's uploads failed")
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
	cause := context.Cause(ctx)
	switch {
	case runErr == nil:
		if detail, failed := j.ErrorFallback(); failed {
			c.Status, c.Error = store.StatusError, detail // a fallback answer finalises the run as error
		}
	case errors.Is(cause, errCancelled):
		c.Status, c.Error = store.StatusInterrupted, errCancelled.Error()
	case errors.Is(cause, errShutdown):
		c.Status, c.Error = store.StatusInterrupted, errShutdown.Error()
	case errors.Is(cause, errLeaseLost):
		c.Status, c.Error = store.StatusError, errLeaseLost.Error()
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
		// A run that lost its lease no longer holds its thread: the thread's next run
		// may have started from the state this one loaded.
		if s.cfg.history() && !errors.Is(cause, errLeaseLost) {
			s.saveState(run, &res.State, version, &c)
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

// saveState saves what the run left as its thread's state, whatever its status
// (DeerFlow's checkpoints; the next run's DanglingToolCall patches an interrupted turn),
// if no one saved the state since the run loaded it. A refused save fails the run.
func (s *Server) saveState(run store.Run, st *state.State, version int64, c *store.Completion) {
	if c.Status == store.StatusInterrupted {
		s.titleInterrupted(st)
	}
	cctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	_, err := s.store.SaveThreadState(cctx, run.ThreadID, *st, version)
	cancel()
	switch {
	case errors.Is(err, store.ErrStateConflict):
		s.log.Error("gateway: thread state not saved: saved by another run since this run loaded it", "thread_id", run.ThreadID, "run_id", run.RunID, "version", version)
		c.Status, c.Error = store.StatusError, "the thread's state was saved by another run since this run loaded it; this run's turn was not saved"
	case err != nil:
		s.log.Error("gateway: save thread state", "thread_id", run.ThreadID, "run_id", run.RunID, "error", err)
	}
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
