package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
	"github.com/agentmeter/agentmeter/runtime/store"
)

// streamRun sends the run's events as Server-Sent Events: metadata, messages (AI
// messages with usage_metadata as they complete, tool messages at the end), the task_*
// events of subagents with their usage, and end (status, cumulative usage). A run this
// process does not execute (another gateway does, or it finished before a restart) gets
// its stream rebuilt from the store once its row is final (storedLog).
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
		ar = &activeRun{events: s.storedLog(r.Context(), run)}
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

// storedLog rebuilds the stream of a finished run this process did not execute from
// the store: metadata, the lead agent's AI messages and then the tool messages from the
// run's journal events, and end (its usage summed from those AI messages, its
// token_usage from the row, "source": "store"). The subagents' task_* events are not
// stored; a run with no stored events (finished before its events were written) gets
// only its end event.
func (s *Server) storedLog(ctx context.Context, run store.Run) *eventLog {
	log := newEventLog()
	defer log.close()
	evs, err := s.store.ListRunEvents(ctx, run.RunID)
	if err != nil {
		s.log.Warn("gateway: stream: read run events", "run_id", run.RunID, "error", err)
	}
	cum := &usageSum{}
	var tools []json.RawMessage
	for i, e := range evs {
		if i == 0 {
			log.publish("metadata", map[string]string{"run_id": run.RunID, "thread_id": run.ThreadID})
		}
		switch e.EventType {
		case "llm.ai.response":
			var meta struct {
				Caller string `json:"caller"`
			}
			var msg message.Message
			if json.Unmarshal(e.Metadata, &meta) != nil || genai.CallerBucket(meta.Caller) != genai.BucketLeadAgent || json.Unmarshal(e.Content, &msg) != nil {
				continue
			}
			if u := msg.UsageMetadata; u != nil {
				cum.InputTokens += u.InputTokens
				cum.OutputTokens += u.OutputTokens
				cum.TotalTokens += u.TotalTokens
			}
			log.publish("messages", e.Content)
		case "llm.tool.result":
			tools = append(tools, e.Content)
		}
	}
	for _, m := range tools {
		log.publish("messages", m)
	}
	end := map[string]any{"run_id": run.RunID, "status": run.Status, "usage": cum, "source": "store",
		"token_usage": map[string]int64{"total_tokens": run.Usage.TotalTokens, "total_input_tokens": run.Usage.TotalInputTokens, "total_output_tokens": run.Usage.TotalOutputTokens}}
	if run.Error != "" {
		end["error"] = run.Error
	}
	if run.TraceID != "" {
		end["trace_id"] = run.TraceID
	}
	log.publish("end", end)
	return log
}
