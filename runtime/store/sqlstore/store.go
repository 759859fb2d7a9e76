package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/store"
)

// Store implements store.RunStore over a *sql.DB.
type Store struct {
	db *sql.DB
	d  Dialect
	// now is the clock (tests pin it).
	now func() time.Time
	// onClose runs after the database is closed (a backend's file lock).
	onClose []func() error
}

var _ store.RunStore = (*Store)(nil)

// New wraps an open database whose schema Migrate has brought up to date.
func New(db *sql.DB, d Dialect) *Store {
	return &Store{db: db, d: d, now: time.Now}
}

// DB returns the underlying database (tests write legacy rows directly).
func (s *Store) DB() *sql.DB { return s.db }

// OnClose registers f to run after Close closes the database.
func (s *Store) OnClose(f func() error) { s.onClose = append(s.onClose, f) }

// Close closes the database, then runs the OnClose functions.
func (s *Store) Close() error {
	errs := []error{s.db.Close()}
	for _, f := range s.onClose {
		errs = append(errs, f())
	}
	s.onClose = nil
	return errors.Join(errs...)
}

func (s *Store) q(query string) string { return s.d.rebind(query) }

// nullable is an optional text column's value: NULL for "", else v as UTF-8. A run's
// error or stop reason can quote what a provider or tool answered, in any encoding, and
// PostgreSQL refuses text that is not UTF-8 (the whole write with it: a run's completion
// and its token counts); each run of invalid bytes is stored as one U+FFFD instead, on
// every backend.
func nullable(v string) any {
	if v == "" {
		return nil
	}
	if !utf8.ValidString(v) {
		return strings.ToValidUTF8(v, "\uFFFD")
	}
	return v
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

// CreateThread implements store.RunStore.
func (s *Store) CreateThread(ctx context.Context, t store.Thread) error {
	if t.ID == "" {
		return errors.New("create thread: thread_id is required")
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = s.now()
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO threads (thread_id, user_id, created_at, updated_at) VALUES (?, ?, ?, ?)`),
		t.ID, nullable(t.UserID), micros(t.CreatedAt), micros(t.CreatedAt))
	if err != nil {
		if s.d.IsUniqueViolation(err) {
			return fmt.Errorf("create thread %q: %w", t.ID, store.ErrExists)
		}
		return fmt.Errorf("create thread %q: %w", t.ID, err)
	}
	return nil
}

// GetThread implements store.RunStore.
func (s *Store) GetThread(ctx context.Context, id string) (store.Thread, error) {
	var (
		user, title sql.NullString
		created     int64
	)
	err := s.db.QueryRowContext(ctx, s.q(`SELECT t.user_id, t.created_at, ts.title FROM threads t
		LEFT JOIN thread_states ts ON ts.thread_id = t.thread_id WHERE t.thread_id = ?`), id).Scan(&user, &created, &title)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Thread{}, fmt.Errorf("thread %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Thread{}, fmt.Errorf("get thread %q: %w", id, err)
	}
	return store.Thread{ID: id, UserID: user.String, CreatedAt: fromMicros(created), Title: title.String}, nil
}

func encodeByModel(m map[string]journal.ModelUsage) (string, error) {
	if len(m) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode token_usage_by_model: %w", err)
	}
	return string(b), nil
}

func decodeByModel(raw []byte) (map[string]journal.ModelUsage, error) {
	m := map[string]journal.ModelUsage{}
	if len(raw) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode token_usage_by_model: %w", err)
	}
	return m, nil
}

// runCost is the cost_usd column: the journal's cost keys of a run.
type runCost struct {
	Total    float64             `json:"total_cost_usd"`
	ByCaller *journal.CallerCost `json:"cost_usd_by_caller,omitempty"`
	ByModel  map[string]float64  `json:"cost_usd_by_model,omitempty"`
	Unpriced int64               `json:"unpriced_llm_call_count,omitempty"`
}

// encodeCost is the cost_usd value of u: NULL when nothing was priced or counted unpriced.
func encodeCost(u journal.CompletionData) (any, error) {
	if u.TotalCostUSD == 0 && u.CostUSDByCaller == nil && len(u.CostUSDByModel) == 0 && u.UnpricedCallCount == 0 {
		return nil, nil
	}
	b, err := json.Marshal(runCost{Total: u.TotalCostUSD, ByCaller: u.CostUSDByCaller, ByModel: u.CostUSDByModel, Unpriced: u.UnpricedCallCount})
	if err != nil {
		return nil, fmt.Errorf("encode cost_usd: %w", err)
	}
	return string(b), nil
}

func decodeCost(raw []byte, u *journal.CompletionData) error {
	if len(raw) == 0 {
		return nil
	}
	var c runCost
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("decode cost_usd: %w", err)
	}
	u.TotalCostUSD, u.CostUSDByCaller, u.CostUSDByModel, u.UnpricedCallCount = c.Total, c.ByCaller, c.ByModel, c.Unpriced
	return nil
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

// CreateRun implements store.RunStore.
func (s *Store) CreateRun(ctx context.Context, r store.Run) error {
	return s.insertRun(ctx, s.db, r, "", 0)
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertRun inserts r at the end of the queue (queue_seq), leased to owner until
// leaseUntil (micros) when owner is set.
func (s *Store) insertRun(ctx context.Context, db execer, r store.Run, owner string, leaseUntil int64) error {
	if err := store.ValidateRun(r); err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	if r.Status == "" {
		r.Status = store.StatusPending
	}
	if r.OperationKind == "" {
		r.OperationKind = store.OperationRun
	}
	now := s.now()
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	byModel, err := encodeByModel(r.Usage.TokenUsageByModel)
	if err != nil {
		return fmt.Errorf("create run %q: %w", r.RunID, err)
	}
	u := r.Usage
	cost, err := encodeCost(u)
	if err != nil {
		return fmt.Errorf("create run %q: %w", r.RunID, err)
	}
	var carrier any
	if len(r.TraceCarrier) > 0 {
		b, err := json.Marshal(r.TraceCarrier)
		if err != nil {
			return fmt.Errorf("create run %q: encode trace_carrier: %w", r.RunID, err)
		}
		carrier = string(b)
	}
	var lease any
	if owner != "" {
		lease = leaseUntil
	}
	_, err = db.ExecContext(ctx, s.q(`INSERT INTO runs (run_id, thread_id, user_id, status, operation_kind, model_name,
		error, stop_reason, trace_id,
		total_input_tokens, total_output_tokens, total_tokens, llm_call_count,
		lead_agent_tokens, subagent_tokens, middleware_tokens, token_usage_by_model, cost_usd,
		message_count, first_human_message, last_ai_message, created_at, updated_at,
		input, trace_carrier, lease_owner, lease_until, queue_seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, `+s.d.NextSeq+`)`),
		r.RunID, r.ThreadID, nullable(r.UserID), string(r.Status), r.OperationKind, nullable(r.ModelName),
		nullable(r.Error), nullable(r.StopReason), nullable(r.TraceID),
		u.TotalInputTokens, u.TotalOutputTokens, u.TotalTokens, u.LLMCallCount,
		u.LeadAgentTokens, u.SubagentTokens, u.MiddlewareTokens, byModel, cost,
		u.MessageCount, nullable(u.FirstHumanMessage), nullable(truncate(u.LastAIMessage, journal.MaxLastAIMessage)),
		micros(r.CreatedAt), micros(r.CreatedAt),
		nullable(r.Input), carrier, nullable(owner), lease)
	if err != nil {
		if s.d.IsUniqueViolation(err) {
			return fmt.Errorf("create run %q: %w", r.RunID, store.ErrExists)
		}
		return fmt.Errorf("create run %q: %w", r.RunID, err)
	}
	return nil
}

const runColumns = `run_id, thread_id, user_id, status, operation_kind, model_name, error, stop_reason, trace_id,
	total_input_tokens, total_output_tokens, total_tokens, llm_call_count,
	lead_agent_tokens, subagent_tokens, middleware_tokens, token_usage_by_model, cost_usd,
	message_count, first_human_message, last_ai_message, created_at, updated_at, finished_at,
	input, trace_carrier, lease_owner`

type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner) (store.Run, error) {
	var (
		r                                                     store.Run
		user, model, errText, stop, trace, firstHuman, lastAI sql.NullString
		input, owner                                          sql.NullString
		status                                                string
		byModel, cost, carrier                                []byte
		created, updated                                      int64
		finished                                              sql.NullInt64
	)
	u := &r.Usage
	if err := sc.Scan(&r.RunID, &r.ThreadID, &user, &status, &r.OperationKind, &model, &errText, &stop, &trace,
		&u.TotalInputTokens, &u.TotalOutputTokens, &u.TotalTokens, &u.LLMCallCount,
		&u.LeadAgentTokens, &u.SubagentTokens, &u.MiddlewareTokens, &byModel, &cost,
		&u.MessageCount, &firstHuman, &lastAI, &created, &updated, &finished,
		&input, &carrier, &owner); err != nil {
		return store.Run{}, err
	}
	if len(carrier) > 0 {
		if err := json.Unmarshal(carrier, &r.TraceCarrier); err != nil {
			return store.Run{}, fmt.Errorf("run %q: decode trace_carrier: %w", r.RunID, err)
		}
	}
	r.Input, r.LeaseOwner = input.String, owner.String
	if err := decodeCost(cost, u); err != nil {
		return store.Run{}, fmt.Errorf("run %q: %w", r.RunID, err)
	}
	m, err := decodeByModel(byModel)
	if err != nil {
		return store.Run{}, fmt.Errorf("run %q: %w", r.RunID, err)
	}
	u.TokenUsageByModel = m
	r.UserID, r.ModelName, r.Error, r.StopReason, r.TraceID = user.String, model.String, errText.String, stop.String, trace.String
	u.FirstHumanMessage, u.LastAIMessage = firstHuman.String, lastAI.String
	r.Status = store.Status(status)
	r.CreatedAt, r.UpdatedAt = fromMicros(created), fromMicros(updated)
	if finished.Valid {
		t := fromMicros(finished.Int64)
		r.FinishedAt = &t
	}
	return r, nil
}

// GetRun implements store.RunStore.
func (s *Store) GetRun(ctx context.Context, runID string) (store.Run, error) {
	r, err := scanRun(s.db.QueryRowContext(ctx, s.q(`SELECT `+runColumns+` FROM runs WHERE run_id = ?`), runID))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Run{}, fmt.Errorf("run %q: %w", runID, store.ErrNotFound)
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("get run %q: %w", runID, err)
	}
	return r, nil
}

// ListRuns implements store.RunStore.
func (s *Store) ListRuns(ctx context.Context, threadID string) ([]store.Run, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+runColumns+` FROM runs WHERE thread_id = ? ORDER BY created_at, run_id`), threadID)
	if err != nil {
		return nil, fmt.Errorf("list runs of %q: %w", threadID, err)
	}
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list runs of %q: %w", threadID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runs of %q: %w", threadID, err)
	}
	return out, nil
}

func (s *Store) exec(ctx context.Context, what, query string, args ...any) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.q(query), args...)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("%s: rows affected: %w", what, err)
	}
	return n > 0, nil
}

// MarkRunning implements store.RunStore.
func (s *Store) MarkRunning(ctx context.Context, runID string) (bool, error) {
	return s.exec(ctx, "mark run "+runID+" running",
		`UPDATE runs SET status = 'running', updated_at = ? WHERE run_id = ? AND status = 'pending'`,
		micros(s.now()), runID)
}

// SetTraceID implements store.RunStore.
func (s *Store) SetTraceID(ctx context.Context, runID, traceID string) error {
	_, err := s.exec(ctx, "set trace id of run "+runID,
		`UPDATE runs SET trace_id = ?, updated_at = ? WHERE run_id = ?`, nullable(traceID), micros(s.now()), runID)
	return err
}

// UpdateRunProgress implements store.RunStore: only while running.
func (s *Store) UpdateRunProgress(ctx context.Context, runID string, u journal.CompletionData) (bool, error) {
	byModel, err := encodeByModel(u.TokenUsageByModel)
	if err != nil {
		return false, fmt.Errorf("update progress of run %q: %w", runID, err)
	}
	cost, err := encodeCost(u)
	if err != nil {
		return false, fmt.Errorf("update progress of run %q: %w", runID, err)
	}
	return s.exec(ctx, "update progress of run "+runID,
		`UPDATE runs SET total_input_tokens = ?, total_output_tokens = ?, total_tokens = ?, llm_call_count = ?,
		lead_agent_tokens = ?, subagent_tokens = ?, middleware_tokens = ?, token_usage_by_model = ?, cost_usd = ?,
		message_count = ?, first_human_message = ?, last_ai_message = ?, updated_at = ?
		WHERE run_id = ? AND status = 'running'`,
		u.TotalInputTokens, u.TotalOutputTokens, u.TotalTokens, u.LLMCallCount,
		u.LeadAgentTokens, u.SubagentTokens, u.MiddlewareTokens, byModel, cost,
		u.MessageCount, nullable(u.FirstHumanMessage), nullable(truncate(u.LastAIMessage, journal.MaxLastAIMessage)),
		micros(s.now()), runID)
}

// UpdateRunCompletion implements store.RunStore with DeerFlow's status guard.
func (s *Store) UpdateRunCompletion(ctx context.Context, runID string, c store.Completion) (bool, error) {
	if !c.Status.Valid() {
		return false, fmt.Errorf("complete run %q: status %q is not a run status", runID, c.Status)
	}
	byModel, err := encodeByModel(c.Usage.TokenUsageByModel)
	if err != nil {
		return false, fmt.Errorf("complete run %q: %w", runID, err)
	}
	u := c.Usage
	cost, err := encodeCost(u)
	if err != nil {
		return false, fmt.Errorf("complete run %q: %w", runID, err)
	}
	now := micros(s.now())
	var finished any
	if c.Status.Final() {
		finished = now
	}
	// The trace id is only overwritten when the completion carries one.
	return s.exec(ctx, "complete run "+runID,
		`UPDATE runs SET status = ?, total_input_tokens = ?, total_output_tokens = ?, total_tokens = ?, llm_call_count = ?,
		lead_agent_tokens = ?, subagent_tokens = ?, middleware_tokens = ?, token_usage_by_model = ?, cost_usd = ?,
		message_count = ?, first_human_message = ?, last_ai_message = ?, error = ?, stop_reason = ?,
		trace_id = COALESCE(?, trace_id), updated_at = ?, finished_at = ?
		WHERE run_id = ? AND (status IN ('pending', 'running', ?) OR (? = 'error' AND status = 'interrupted'))`,
		string(c.Status), u.TotalInputTokens, u.TotalOutputTokens, u.TotalTokens, u.LLMCallCount,
		u.LeadAgentTokens, u.SubagentTokens, u.MiddlewareTokens, byModel, cost,
		u.MessageCount, nullable(u.FirstHumanMessage), nullable(truncate(u.LastAIMessage, journal.MaxLastAIMessage)),
		nullable(c.Error), nullable(c.StopReason), nullable(c.TraceID), now, finished,
		runID, string(c.Status), string(c.Status))
}

// InterruptRuns implements store.RunStore.
func (s *Store) InterruptRuns(ctx context.Context, runIDs []string, reason string) (int64, error) {
	if len(runIDs) == 0 {
		return 0, nil
	}
	args := []any{nullable(reason), micros(s.now()), micros(s.now())}
	for _, id := range runIDs {
		args = append(args, id)
	}
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE runs SET status = 'interrupted', error = COALESCE(error, ?), updated_at = ?, finished_at = ?
		WHERE status IN ('pending', 'running') AND run_id IN (`+placeholders(len(runIDs))+`)`), args...)
	if err != nil {
		return 0, fmt.Errorf("interrupt %d runs: %w", len(runIDs), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("interrupt %d runs: rows affected: %w", len(runIDs), err)
	}
	return n, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// AggregateTokensByThread implements store.RunStore: one SELECT of the per-row columns
// with no GROUP BY, reduced by store.Aggregate (as DeerFlow reduces in application code).
func (s *Store) AggregateTokensByThread(ctx context.Context, threadID string, includeActive bool) (store.TokenUsage, error) {
	return s.aggregate(ctx, "thread_id", threadID, includeActive)
}

// AggregateTokensByUser implements store.RunStore: the same SELECT over the user's runs.
func (s *Store) AggregateTokensByUser(ctx context.Context, userID string, includeActive bool) (store.TokenUsage, error) {
	return s.aggregate(ctx, "user_id", userID, includeActive)
}

// aggregate reduces the run rows whose column (thread_id or user_id, never user input)
// equals id.
func (s *Store) aggregate(ctx context.Context, column, threadID string, includeActive bool) (store.TokenUsage, error) {
	statuses := store.AggregatedStatuses(includeActive)
	args := []any{threadID, store.OperationRun}
	for _, st := range statuses {
		args = append(args, string(st))
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT model_name, total_tokens, total_input_tokens, total_output_tokens,
		lead_agent_tokens, subagent_tokens, middleware_tokens, token_usage_by_model, cost_usd
		FROM runs WHERE `+column+` = ? AND operation_kind = ? AND status IN (`+placeholders(len(statuses))+`)`), args...)
	if err != nil {
		return store.TokenUsage{}, fmt.Errorf("aggregate tokens of thread %q: %w", threadID, err)
	}
	defer rows.Close()
	var agg []store.AggregateRow
	for rows.Next() {
		var (
			r         store.AggregateRow
			model     sql.NullString
			raw, cost []byte
		)
		if err := rows.Scan(&model, &r.TotalTokens, &r.TotalInputTokens, &r.TotalOutputTokens,
			&r.LeadAgentTokens, &r.SubagentTokens, &r.MiddlewareTokens, &raw, &cost); err != nil {
			return store.TokenUsage{}, fmt.Errorf("aggregate tokens of thread %q: %w", threadID, err)
		}
		r.ModelName = model.String
		if r.ByModel, err = decodeByModel(raw); err != nil {
			return store.TokenUsage{}, fmt.Errorf("aggregate tokens of thread %q: %w", threadID, err)
		}
		var c journal.CompletionData
		if err := decodeCost(cost, &c); err != nil {
			return store.TokenUsage{}, fmt.Errorf("aggregate tokens of thread %q: %w", threadID, err)
		}
		r.CostUSDByCaller = c.CostUSDByCaller
		agg = append(agg, r)
	}
	if err := rows.Err(); err != nil {
		return store.TokenUsage{}, fmt.Errorf("aggregate tokens of thread %q: %w", threadID, err)
	}
	return store.Aggregate(agg), nil
}

// LatestRunModel implements store.RunStore.
func (s *Store) LatestRunModel(ctx context.Context, threadID string) (string, error) {
	var m sql.NullString
	err := s.db.QueryRowContext(ctx, s.q(`SELECT model_name FROM runs WHERE thread_id = ? AND operation_kind = ?
		ORDER BY created_at DESC, run_id DESC LIMIT 1`), threadID, store.OperationRun).Scan(&m)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("latest run model of thread %q: %w", threadID, err)
	}
	return m.String, nil
}
