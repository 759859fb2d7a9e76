package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/message"
)

// MaxLastAIMessage bounds last_ai_message (DeerFlow truncates to 2000 characters).
const MaxLastAIMessage = 2000

// ModelUsage is one per-model bucket of token_usage_by_model. CacheReadTokens is sparse:
// omitted from JSON while 0 (DeerFlow keeps the legacy 3-key shape without cache hits).
type ModelUsage struct {
	InputTokens     int64 `json:"input_tokens"`
	OutputTokens    int64 `json:"output_tokens"`
	TotalTokens     int64 `json:"total_tokens"`
	CacheReadTokens int64 `json:"cache_read_tokens,omitempty"`
	// CostUSD is added to DeerFlow's bucket (omitted while 0), so the stored per-model JSON
	// carries the cost and thread totals can be summed from it.
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// ThreadBaseline is what a thread used before the current run (its earlier runs), which
// the gateway puts in the run context under BaselineContextKey so a thread budget counts
// the whole thread.
type ThreadBaseline struct {
	Tokens  int64
	CostUSD float64
	// UserTokens and UserCostUSD are the same over every thread of the run's user.
	UserTokens  int64
	UserCostUSD float64
}

// BaselineContextKey is the run-context key of a ThreadBaseline.
const BaselineContextKey = "journal.thread_baseline"

// CompletionData is DeerFlow's get_completion_data(), with its field names.
// Invariants: the per-model totals and the three caller buckets each sum to TotalTokens.
type CompletionData struct {
	TotalInputTokens  int64                 `json:"total_input_tokens"`
	TotalOutputTokens int64                 `json:"total_output_tokens"`
	TotalTokens       int64                 `json:"total_tokens"`
	LLMCallCount      int64                 `json:"llm_call_count"`
	LeadAgentTokens   int64                 `json:"lead_agent_tokens"`
	SubagentTokens    int64                 `json:"subagent_tokens"`
	MiddlewareTokens  int64                 `json:"middleware_tokens"`
	TokenUsageByModel map[string]ModelUsage `json:"token_usage_by_model"`
	MessageCount      int64                 `json:"message_count"`
	LastAIMessage     string                `json:"last_ai_message"`
	FirstHumanMessage string                `json:"first_human_message"`

	// Cost (USD) in keys DeerFlow does not have, so its keys above keep their shape; all
	// omitted while nothing was priced (no pricer, or only unknown models). The same price
	// table and formulas as the collector's cost step (docs/cost.md).
	TotalCostUSD      float64            `json:"total_cost_usd,omitempty"`
	CostUSDByCaller   *CallerCost        `json:"cost_usd_by_caller,omitempty"`
	CostUSDByModel    map[string]float64 `json:"cost_usd_by_model,omitempty"`
	UnpricedCallCount int64              `json:"unpriced_llm_call_count,omitempty"`
}

// CallerCost is cost_usd_by_caller: the three caller buckets of the token counts.
type CallerCost struct {
	LeadAgent  float64 `json:"lead_agent"`
	Subagent   float64 `json:"subagent"`
	Middleware float64 `json:"middleware"`
}

// Pricer prices one model call; ok is false for a model it has no price for.
// pricing.Table's journal adapter (pricing.JournalPricer) is the one used.
type Pricer interface {
	// Price prices usage u, of which cacheWrite1h cache writes had a 1-hour lifetime.
	Price(provider, model string, u genai.Usage, cacheWrite1h int64, at time.Time) (genai.Cost, bool)
}

// UsageRecord is one external usage record (a subagent's model call, or another
// process's), as produced by TokenCollector and accepted by RecordExternalLLMUsageRecords.
type UsageRecord struct {
	SourceRunID     string `json:"source_run_id"`
	Caller          string `json:"caller"`
	ModelName       string `json:"model_name,omitempty"`
	InputTokens     int64  `json:"input_tokens"`
	OutputTokens    int64  `json:"output_tokens"`
	TotalTokens     int64  `json:"total_tokens"`
	CacheReadTokens int64  `json:"cache_read_tokens,omitempty"`
	// Added to DeerFlow's record so the journal prices it like the call it came from.
	CacheCreationTokens int64 `json:"cache_creation_tokens,omitempty"`
	ReasoningTokens     int64 `json:"reasoning_tokens,omitempty"`
	// CacheCreation1hTokens is the 1-hour part of CacheCreationTokens.
	CacheCreation1hTokens int64 `json:"cache_creation_1h_tokens,omitempty"`
	// CostUSD is the cost the provider reported for the call, when it did; it wins over
	// the price table.
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// usage is the record's contract usage.
func (r UsageRecord) usage() genai.Usage {
	return genai.Usage{Input: r.InputTokens, Output: r.OutputTokens, CacheRead: r.CacheReadTokens, CacheCreation: r.CacheCreationTokens, Reasoning: r.ReasoningTokens}
}

// UsageRecorder is what the task tool looks for to report subagent usage.
type UsageRecorder interface {
	RecordExternalLLMUsageRecords(records []UsageRecord)
}

// Event is one journal event: a model call's, the run's, a middleware's.
type Event struct {
	Type     string         `json:"event_type"`
	Category string         `json:"category"`
	Content  any            `json:"content,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
	Time     time.Time      `json:"created_at"`
}

// Options configure a RunJournal.
type Options struct {
	RunID    string
	ThreadID string
	// TrackTokenUsage: nil means true (run_events.track_token_usage default).
	TrackTokenUsage *bool
	// ProgressReporter, when set, receives throttled snapshots while the run is going
	// (the worker's update_run_progress).
	ProgressReporter func(CompletionData)
	// ProgressInterval is the throttle window (DeerFlow default 5 s; 0 reports every change).
	ProgressInterval time.Duration
	// Pricer, when set, prices every counted call and record (the cost keys).
	Pricer Pricer
}

// DefaultProgressInterval is DeerFlow's progress_flush_interval.
const DefaultProgressInterval = 5 * time.Second

// RunJournal accounts one run. The zero value is not usable; use New.
type RunJournal struct {
	runID, threadID string
	track           bool
	reporter        func(CompletionData)
	interval        time.Duration
	pricer          Pricer

	mu              sync.Mutex
	data            CompletionData
	countedCalls    map[string]bool // model-call ids already counted for tokens
	summarisedCalls map[string]bool // model-call ids already counted in the message summary
	externalSeen    map[string]bool // source_run_ids of external records
	events          []Event
	llmCallIndex    int
	errorFallback   string
	hasFallback     bool
	memoryRecorded  bool

	lastProgress time.Time
	progressTmr  *time.Timer
}

// New returns a journal for one run.
func New(opts Options) *RunJournal {
	return &RunJournal{
		runID: opts.RunID, threadID: opts.ThreadID,
		track:           opts.TrackTokenUsage == nil || *opts.TrackTokenUsage,
		reporter:        opts.ProgressReporter,
		interval:        opts.ProgressInterval,
		pricer:          opts.Pricer,
		data:            CompletionData{TokenUsageByModel: map[string]ModelUsage{}},
		countedCalls:    map[string]bool{},
		summarisedCalls: map[string]bool{},
		externalSeen:    map[string]bool{},
	}
}

// RunID and ThreadID identify the journal's run.
func (j *RunJournal) RunID() string    { return j.runID }
func (j *RunJournal) ThreadID() string { return j.threadID }

// IdentifyCaller picks the caller from a call's tags: the first tag equal to "lead_agent"
// or starting with "subagent:" or "middleware:" wins, verbatim; otherwise "lead_agent".
func IdentifyCaller(tags []string) string {
	for _, t := range tags {
		if t == genai.BucketLeadAgent || strings.HasPrefix(t, genai.BucketSubagent+":") || strings.HasPrefix(t, genai.BucketMiddleware+":") {
			return t
		}
	}
	return genai.BucketLeadAgent
}

// OnLLMEnd accounts one finished model call. callID is the model-call id
// (LangChain's run_id); caller is the caller tag; generations are the response messages
// (normally one AI message).
func (j *RunJournal) OnLLMEnd(callID, caller string, generations []message.Message, latency time.Duration) {
	if caller == "" {
		caller = genai.BucketLeadAgent
	}
	j.mu.Lock()
	changed := false
	for _, msg := range generations {
		j.llmCallIndex++
		var usage any
		if msg.UsageMetadata != nil {
			usage = *msg.UsageMetadata
		}
		j.events = append(j.events, Event{
			Type: "llm.ai.response", Category: "message", Content: msg, Time: time.Now(),
			Metadata: map[string]any{"caller": caller, "usage": usage, "latency_ms": latency.Milliseconds(), "llm_call_index": j.llmCallIndex},
		})
		if !j.summarisedCalls[callID] {
			j.summarisedCalls[callID] = true
			j.data.MessageCount++
			if caller == genai.BucketLeadAgent && msg.Role == message.RoleAI && strings.TrimSpace(msg.Content) != "" {
				j.data.LastAIMessage = truncate(msg.Content, MaxLastAIMessage)
			}
			changed = true
		}
		if fb, _ := msg.AdditionalKwargs[message.KwargErrorFallback].(bool); fb {
			j.hasFallback = true
			j.errorFallback = fallbackDetail(msg)
		}
		if !j.track || msg.UsageMetadata == nil || j.countedCalls[callID] {
			continue
		}
		u := *msg.UsageMetadata
		total := u.Total()
		if total <= 0 {
			continue // a call without usage does not block a later one with usage
		}
		j.countedCalls[callID] = true
		j.addLocked(caller, msg.ModelName(), u.InputTokens, u.OutputTokens, total, u.CacheRead())
		var provided *float64
		if pc, ok := msg.ProviderCostUSD(); ok {
			provided = &pc
		}
		j.addCostLocked(caller, msg.ModelName(), u.GenAI(), u.CacheCreation1h(), provided)
		j.data.LLMCallCount++
		changed = true
	}
	j.mu.Unlock()
	if changed {
		j.scheduleProgress()
	}
}

func fallbackDetail(m message.Message) string {
	for _, k := range []string{"error_detail", "error_reason"} {
		if s, ok := m.AdditionalKwargs[k].(string); ok && s != "" {
			return s
		}
	}
	if m.Content != "" {
		return m.Content
	}
	return "LLM provider failed after retries"
}

// RecordExternalLLMUsageRecords adds records produced elsewhere: skipped when
// tracking is off, for empty or already seen source_run_id, and when the total (or
// input+output) is not positive. llm_call_count is not incremented.
func (j *RunJournal) RecordExternalLLMUsageRecords(records []UsageRecord) {
	if !j.track {
		return
	}
	j.mu.Lock()
	changed := false
	for _, r := range records {
		if r.SourceRunID == "" || j.externalSeen[r.SourceRunID] {
			continue
		}
		total := r.TotalTokens
		if total <= 0 {
			total = r.InputTokens + r.OutputTokens
		}
		if total <= 0 {
			continue
		}
		j.externalSeen[r.SourceRunID] = true
		caller := IdentifyCaller([]string{r.Caller})
		j.addLocked(caller, r.ModelName, r.InputTokens, r.OutputTokens, total, r.CacheReadTokens)
		j.addCostLocked(caller, r.ModelName, r.usage(), r.CacheCreation1hTokens, r.CostUSD)
		changed = true
	}
	j.mu.Unlock()
	if changed {
		j.scheduleProgress()
	}
}

// OnHumanInput records the first human message of the run (llm.human.input) and counts it.
func (j *RunJournal) OnHumanInput(m message.Message) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.data.MessageCount++
	if j.data.FirstHumanMessage == "" {
		j.data.FirstHumanMessage = m.Content
		j.events = append(j.events, Event{Type: "llm.human.input", Category: "message", Content: m, Time: time.Now()})
	}
}

// OnToolEnd records a tool result (llm.tool.result) and counts it.
func (j *RunJournal) OnToolEnd(m message.Message) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.data.MessageCount++
	j.events = append(j.events, Event{Type: "llm.tool.result", Category: "message", Content: m, Time: time.Now()})
}

// OnRunStart, OnRunEnd and OnRunError record lifecycle events.
func (j *RunJournal) OnRunStart(caller string) {
	j.event("run.start", "lifecycle", nil, map[string]any{"caller": caller})
}
func (j *RunJournal) OnRunEnd(status string) {
	j.event("run.end", "lifecycle", nil, map[string]any{"status": status})
}
func (j *RunJournal) OnRunError(err error) {
	j.event("run.error", "lifecycle", err.Error(), map[string]any{"error_type": errorType(err)})
}

// RecordMiddleware records a middleware event "middleware:<tag>" (category middleware).
func (j *RunJournal) RecordMiddleware(tag, name, hook, action string, changes map[string]any) {
	j.event("middleware:"+tag, "middleware", map[string]any{"name": name, "hook": hook, "action": action, "changes": changes}, nil)
}

// RecordMemoryContext records the sha256 of the effective memory once per run.
func (j *RunJournal) RecordMemoryContext(memory string) {
	j.mu.Lock()
	if j.memoryRecorded {
		j.mu.Unlock()
		return
	}
	j.memoryRecorded = true
	j.mu.Unlock()
	sum := sha256.Sum256([]byte(memory))
	j.event("context:memory", "context", map[string]any{"content_sha256": hex.EncodeToString(sum[:])}, nil)
}

func (j *RunJournal) event(typ, cat string, content any, meta map[string]any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, Event{Type: typ, Category: cat, Content: content, Metadata: meta, Time: time.Now()})
}

// Events returns a copy of the recorded events.
func (j *RunJournal) Events() []Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Event(nil), j.events...)
}

// CompletionData returns a snapshot (the by-model map is copied).
func (j *RunJournal) CompletionData() CompletionData {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.snapshotLocked()
}

func (j *RunJournal) snapshotLocked() CompletionData {
	d := j.data
	d.TokenUsageByModel = make(map[string]ModelUsage, len(j.data.TokenUsageByModel))
	for k, v := range j.data.TokenUsageByModel {
		d.TokenUsageByModel[k] = v
	}
	if j.data.CostUSDByCaller != nil {
		cc := *j.data.CostUSDByCaller
		d.CostUSDByCaller = &cc
	}
	if j.data.CostUSDByModel != nil {
		d.CostUSDByModel = make(map[string]float64, len(j.data.CostUSDByModel))
		for k, v := range j.data.CostUSDByModel {
			d.CostUSDByModel[k] = v
		}
	}
	return d
}

// ErrorFallback reports whether a response was an LLM-error fallback, with its detail;
// the run is then finalised with status error.
func (j *RunJournal) ErrorFallback() (string, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.errorFallback, j.hasFallback
}

// scheduleProgress reports a snapshot now if the throttle window allows, else schedules
// one trailing snapshot at the end of the window.
func (j *RunJournal) scheduleProgress() {
	if j.reporter == nil {
		return
	}
	j.mu.Lock()
	now := time.Now()
	if j.interval <= 0 || now.Sub(j.lastProgress) >= j.interval {
		j.lastProgress = now
		snap := j.snapshotLocked()
		j.mu.Unlock()
		j.reporter(snap)
		return
	}
	if j.progressTmr == nil {
		wait := j.interval - now.Sub(j.lastProgress)
		j.progressTmr = time.AfterFunc(wait, func() {
			j.mu.Lock()
			if j.progressTmr == nil { // cancelled by Flush
				j.mu.Unlock()
				return
			}
			j.progressTmr = nil
			j.lastProgress = time.Now()
			snap := j.snapshotLocked()
			j.mu.Unlock()
			j.reporter(snap)
		})
	}
	j.mu.Unlock()
}

// Flush cancels a pending delayed progress snapshot without writing it (the final
// state is persisted through CompletionData at run end).
func (j *RunJournal) Flush() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.progressTmr != nil {
		j.progressTmr.Stop()
		j.progressTmr = nil
	}
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

func errorType(err error) string {
	type typed interface{ ErrorType() string }
	if t, ok := err.(typed); ok {
		return t.ErrorType()
	}
	return strings.TrimPrefix(typeName(err), "*")
}
