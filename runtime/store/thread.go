package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// ThreadStore keeps what outlives one run: the thread's state (so the next run continues
// the conversation — DeerFlow's checkpointer), the per-user memory of each agent, and the
// journal events of every run.
type ThreadStore interface {
	// LoadThreadState returns the state the thread's last run left (messages, title,
	// todos and the other channels) and its version; the zero State and version 0 when
	// the thread has none yet.
	LoadThreadState(ctx context.Context, threadID string) (state.State, int64, error)
	// SaveThreadState replaces the thread's state if its version is still version (the
	// one loaded; 0: none saved yet) and returns the new version; ErrStateConflict when
	// another save came first. One statement: never half-written.
	SaveThreadState(ctx context.Context, threadID string, st state.State, version int64) (int64, error)
	// LoadMemory returns the memory of (user, agent); "" when there is none.
	LoadMemory(ctx context.Context, userID, agentName string) (string, error)
	// SaveMemory replaces the memory of (user, agent).
	SaveMemory(ctx context.Context, userID, agentName, memory string) error
	// AppendRunEvents stores events after the run's earlier ones (one transaction).
	AppendRunEvents(ctx context.Context, runID, threadID string, events []journal.Event) error
	// ListRunEvents returns the run's events in order (at most MaxRunEvents).
	ListRunEvents(ctx context.Context, runID string) ([]RunEvent, error)
}

// MaxRunEvents bounds the events one ListRunEvents call returns.
const MaxRunEvents = 10_000

// RunEvent is one stored journal event (DeerFlow's run event store row).
type RunEvent struct {
	Seq       int64           `json:"seq"`
	RunID     string          `json:"run_id"`
	ThreadID  string          `json:"thread_id"`
	EventType string          `json:"event_type"`
	Category  string          `json:"category"`
	Content   json.RawMessage `json:"content,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
}
