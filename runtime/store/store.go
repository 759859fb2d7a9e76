package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentmeter/agentmeter/runtime/journal"
)

// Status is a run's lifecycle status (DeerFlow's runs.status).
type Status string

// Run statuses. pending → running → one of the final ones.
const (
	StatusPending     Status = "pending"
	StatusRunning     Status = "running"
	StatusSuccess     Status = "success"
	StatusError       Status = "error"
	StatusTimeout     Status = "timeout"
	StatusInterrupted Status = "interrupted"
)

// Valid reports whether s is one of the six statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusRunning, StatusSuccess, StatusError, StatusTimeout, StatusInterrupted:
		return true
	}
	return false
}

// Final reports whether s ends a run.
func (s Status) Final() bool {
	return s == StatusSuccess || s == StatusError || s == StatusTimeout || s == StatusInterrupted
}

// OperationRun is the operation_kind of agent runs; only these are aggregated.
// DeerFlow's other kinds (checkpoint_write, artifact_write, delete) share the table.
const OperationRun = "run"

// MaxModelName bounds runs.model_name (DeerFlow: 128 characters).
const MaxModelName = 128

// Errors callers branch on (wrapped with context by the backends).
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
)

// Thread is one conversation. UserID "" means shared (DeerFlow's null user_id): every
// caller passes the owner check.
type Thread struct {
	ID        string    `json:"thread_id"`
	UserID    string    `json:"user_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Title is the thread's title once its first exchange was titled (read from the
	// thread state; never written by CreateThread).
	Title string `json:"title,omitempty"`
}

// Run is one row of the runs table.
type Run struct {
	RunID         string `json:"run_id"`
	ThreadID      string `json:"thread_id"`
	UserID        string `json:"user_id,omitempty"`
	Status        Status `json:"status"`
	OperationKind string `json:"operation_kind"`
	ModelName     string `json:"model_name,omitempty"`
	Error         string `json:"error,omitempty"`
	StopReason    string `json:"stop_reason,omitempty"`
	// TraceID is the OpenTelemetry trace id the run exported (hex), "" until known.
	TraceID string `json:"trace_id,omitempty"`
	// Usage holds the token counters, per-model usage and message summary.
	Usage journal.CompletionData `json:"usage"`
	// Input is the run's human message as JSON, what the executing process runs ("":
	// not set, or not ready yet).
	Input string `json:"-"`
	// TraceCarrier holds the caller's trace headers (traceparent, tracestate, baggage,
	// langsmith-trace) for the executing process.
	TraceCarrier map[string]string `json:"-"`
	// LeaseOwner is the process executing (or admitting) the run, "" when none.
	LeaseOwner string     `json:"-"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// Completion is what update_run_completion writes at the end of a run.
type Completion struct {
	Status     Status
	Usage      journal.CompletionData
	Error      string
	StopReason string
	TraceID    string
}

// RunStore persists threads and runs. Implementations are safe for concurrent use.
type RunStore interface {
	ThreadStore
	RunQueue
	// CreateThread inserts a thread; ErrExists when the id is taken.
	CreateThread(ctx context.Context, t Thread) error
	// GetThread returns a thread; ErrNotFound when absent.
	GetThread(ctx context.Context, id string) (Thread, error)
	// CreateRun inserts a run (status pending unless set); ErrExists when the id is taken.
	CreateRun(ctx context.Context, r Run) error
	// GetRun returns a run; ErrNotFound when absent.
	GetRun(ctx context.Context, runID string) (Run, error)
	// ListRuns returns a thread's runs, oldest first.
	ListRuns(ctx context.Context, threadID string) ([]Run, error)
	// MarkRunning moves a pending run to running (false when it was not pending).
	MarkRunning(ctx context.Context, runID string) (bool, error)
	// SetTraceID records the trace id the run exported.
	SetTraceID(ctx context.Context, runID, traceID string) error
	// UpdateRunProgress writes a progress snapshot only while the run is running;
	// it reports whether a row changed.
	UpdateRunProgress(ctx context.Context, runID string, usage journal.CompletionData) (bool, error)
	// UpdateRunCompletion writes the final status and counters only if the current status
	// is pending, running or the target itself — or interrupted when the target is error
	// (DeerFlow's status guard); it reports whether a row changed. Everything is one
	// statement: a run row is never half-written.
	UpdateRunCompletion(ctx context.Context, runID string, c Completion) (bool, error)
	// InterruptRuns marks the given runs interrupted if they are still pending or running
	// (graceful shutdown) and returns how many changed.
	InterruptRuns(ctx context.Context, runIDs []string, reason string) (int64, error)
	// AggregateTokensByThread is DeerFlow's token-usage aggregation: the thread's
	// run-kind rows with status success or error (plus running with includeActive),
	// reduced by Aggregate.
	AggregateTokensByThread(ctx context.Context, threadID string, includeActive bool) (TokenUsage, error)
	// AggregateTokensByUser is the same reduction over every thread of one user (the
	// per-user budget's baseline).
	AggregateTokensByUser(ctx context.Context, userID string, includeActive bool) (TokenUsage, error)
	// LatestRunModel is the model_name of the thread's newest run ("" when none).
	LatestRunModel(ctx context.Context, threadID string) (string, error)
	// Close releases the store.
	Close() error
}

// AggregatedStatuses are the statuses the token-usage aggregation counts.
func AggregatedStatuses(includeActive bool) []Status {
	if includeActive {
		return []Status{StatusSuccess, StatusError, StatusRunning}
	}
	return []Status{StatusSuccess, StatusError}
}

// ValidateRun checks a run before insertion; messages name the field.
func ValidateRun(r Run) error {
	var errs []error
	if r.RunID == "" {
		errs = append(errs, errors.New("run_id is required"))
	}
	if r.ThreadID == "" {
		errs = append(errs, errors.New("thread_id is required"))
	}
	if r.Status != "" && !r.Status.Valid() {
		errs = append(errs, fmt.Errorf("status %q is not a run status", r.Status))
	}
	if n := len([]rune(r.ModelName)); n > MaxModelName {
		errs = append(errs, fmt.Errorf("model_name is %d characters; the limit is %d", n, MaxModelName))
	}
	return errors.Join(errs...)
}
