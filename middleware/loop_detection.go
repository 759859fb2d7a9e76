package middleware

import (
	"container/list"
	"context"
	"crypto/md5" // a fingerprint, as DeerFlow's (not a security use)
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// LoopDetection messages (DeerFlow's LoopDetectionMiddleware).
const (
	LoopWarningMessage  = "[LOOP DETECTED] You are repeating the same tool calls. Stop calling tools and produce your final answer now. If you cannot complete the task, summarize what you accomplished so far."
	LoopHardStopMessage = "[FORCED STOP] Repeated tool calls exceeded the safety limit. Producing final answer with results collected so far."
	loopToolWarnFmt     = "[LOOP DETECTED] You have called %s %d times without producing a final answer. Stop calling this tool repeatedly: use the results you already have, try a different approach, or produce your final answer."
	loopToolHardFmt     = "[FORCED STOP] Tool %s called %d times — exceeded the per-tool safety limit. Producing final answer with results collected so far."
	loopWarningName     = "loop_warning"
	maxPendingLoopWarns = 4
	readFileBucket      = 200
)

var salientKeys = []string{"path", "url", "query", "command", "pattern", "glob", "cmd"}

// LoopDetectionMiddleware stops tool-call loops in two layers, as DeerFlow's does:
// identical call sets (hash window; warn, then hard stop) and the same tool called too
// often (per-tool frequency window with overrides). Warnings are queued per (thread, run)
// and appended to the next model request as a transient HumanMessage "loop_warning"
// (never persisted, never splitting tool-call pairs); a hard stop strips the tool calls of
// the response, appends the stop notice and records stop_reason loop_capped.
type LoopDetectionMiddleware struct {
	cfg        LoopDetectionConfig
	freqWindow int
	// perAgent scopes history and warnings by agent execution as well as thread: parallel
	// subagents share their parent's thread and run ids.
	perAgent bool

	mu      sync.Mutex
	threads map[string]*list.Element // LRU over threads
	lru     *list.List
	pending map[pendingKey][]string
	order   []pendingKey // pending keys in touch order (capped at 2 × max threads)
}

type pendingKey struct{ thread, run string }

type threadLoopState struct {
	id          string
	hashes      []string
	warned      map[string]bool
	names       []string
	warnedNames map[string]bool
}

// NewLoopDetectionMiddleware validates cfg and returns the middleware.
func NewLoopDetectionMiddleware(cfg LoopDetectionConfig) (*LoopDetectionMiddleware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := max(cfg.WindowSize, cfg.ToolFreqHardLimit)
	for _, o := range cfg.ToolFreqOverrides {
		w = max(w, o.HardLimit)
	}
	return &LoopDetectionMiddleware{cfg: cfg, freqWindow: w, threads: map[string]*list.Element{}, lru: list.New(),
		pending: map[pendingKey][]string{}}, nil
}

// Name implements agent.Middleware.
func (*LoopDetectionMiddleware) Name() string { return NameLoopDetection }

// key is the (thread, run) scope of rt; a missing thread id is "default".
func (m *LoopDetectionMiddleware) key(rt *agent.Runtime) pendingKey {
	k := pendingKey{threadID(rt), runID(rt)}
	if m.perAgent && rt != nil && rt.AgentID != "" {
		k.thread += "#" + rt.AgentID
	}
	return k
}

// FrequencyWindow is the layer-2 window (max of window_size, tool_freq_hard_limit and
// every override's hard limit).
func (m *LoopDetectionMiddleware) FrequencyWindow() int { return m.freqWindow }

func (m *LoopDetectionMiddleware) threadState(id string) *threadLoopState {
	if e, ok := m.threads[id]; ok {
		m.lru.MoveToFront(e)
		return e.Value.(*threadLoopState)
	}
	s := &threadLoopState{id: id, warned: map[string]bool{}, warnedNames: map[string]bool{}}
	m.threads[id] = m.lru.PushFront(s)
	for m.lru.Len() > m.cfg.MaxTrackedThreads {
		old := m.lru.Back()
		m.lru.Remove(old)
		delete(m.threads, old.Value.(*threadLoopState).id)
	}
	return s
}

// Reset clears all state, or one thread's.
func (m *LoopDetectionMiddleware) Reset(thread string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if thread == "" {
		m.threads, m.lru, m.pending, m.order = map[string]*list.Element{}, list.New(), map[pendingKey][]string{}, nil
		return
	}
	if e, ok := m.threads[thread]; ok {
		m.lru.Remove(e)
		delete(m.threads, thread)
	}
}

// TrackedThreads is the number of threads with history.
func (m *LoopDetectionMiddleware) TrackedThreads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lru.Len()
}

// HashToolCalls is the order-independent fingerprint of a response's tool calls.
func HashToolCalls(calls []message.ToolCall) string {
	keys := make([]string, 0, len(calls))
	for _, c := range calls {
		keys = append(keys, c.Name+"\x00"+stableKey(c.Name, c.Args))
	}
	sort.Strings(keys)
	sum := md5.Sum([]byte(strings.Join(keys, "\x01")))
	return hex.EncodeToString(sum[:])[:12]
}

func stableKey(name string, args map[string]any) string {
	switch name {
	case "read_file":
		start, end := intArg(args["start_line"]), intArg(args["end_line"])
		if start > end && end > 0 {
			start, end = end, start
		}
		path, _ := args["path"].(string)
		return fmt.Sprintf("%s:%d-%d", path, start/readFileBucket, end/readFileBucket)
	case "write_file", "str_replace":
		return canonicalJSON(args)
	}
	salient := map[string]any{}
	for _, k := range salientKeys {
		if v, ok := args[k]; ok {
			salient[k] = v
		}
	}
	if len(salient) > 0 {
		return canonicalJSON(salient)
	}
	return canonicalJSON(args)
}

func intArg(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	return 0
}

// canonicalJSON marshals with sorted keys (encoding/json sorts map keys).
func canonicalJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func count[T comparable](xs []T, x T) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// BeforeAgent drops other runs' pending warnings for the thread.
func (m *LoopDetectionMiddleware) BeforeAgent(_ context.Context, rt *agent.Runtime, _ *state.State) (*state.Update, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.key(rt)
	for k := range m.pending {
		if k.thread == cur.thread && k.run != cur.run {
			m.dropPendingLocked(k)
		}
	}
	return nil, nil
}

// AfterAgent drops the current run's pending warnings.
func (m *LoopDetectionMiddleware) AfterAgent(_ context.Context, rt *agent.Runtime, _ *state.State) (*state.Update, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropPendingLocked(m.key(rt))
	return nil, nil
}

func (m *LoopDetectionMiddleware) dropPendingLocked(k pendingKey) {
	delete(m.pending, k)
	for i, o := range m.order {
		if o == k {
			m.order = append(m.order[:i], m.order[i+1:]...)
			break
		}
	}
}

func (m *LoopDetectionMiddleware) queueLocked(k pendingKey, text string) {
	list := m.pending[k]
	for _, t := range list {
		if t == text {
			return
		}
	}
	list = append(list, text)
	if len(list) > maxPendingLoopWarns {
		list = list[len(list)-maxPendingLoopWarns:]
	}
	m.pending[k] = list
	for i, o := range m.order {
		if o == k {
			m.order = append(m.order[:i], m.order[i+1:]...)
			break
		}
	}
	m.order = append(m.order, k)
	for len(m.order) > 2*m.cfg.MaxTrackedThreads {
		delete(m.pending, m.order[0])
		m.order = m.order[1:]
	}
}

// Pending returns the queued warnings of (thread, run) (tests, diagnostics).
func (m *LoopDetectionMiddleware) Pending(thread, run string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.pending[pendingKey{thread, run}]...)
}

// AfterModel implements agent.AfterModelHook.
func (m *LoopDetectionMiddleware) AfterModel(_ context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	last, ok := lastAIIsLast(st.Messages)
	if !ok || len(last.ToolCalls) == 0 {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := m.key(rt)
	ts := m.threadState(key.thread)

	// Layer 1: identical call sets.
	h := HashToolCalls(last.ToolCalls)
	ts.hashes = append(ts.hashes, h)
	if len(ts.hashes) > m.cfg.WindowSize {
		ts.hashes = ts.hashes[len(ts.hashes)-m.cfg.WindowSize:]
	}
	for w := range ts.warned { // prune warned hashes to the sliding window
		if count(ts.hashes, w) == 0 {
			delete(ts.warned, w)
		}
	}
	n := count(ts.hashes, h)
	if n >= m.cfg.HardLimit {
		return m.hardStop(rt, last, LoopHardStopMessage), nil
	}
	if n >= m.cfg.WarnThreshold && !ts.warned[h] {
		ts.warned[h] = true
		m.queueLocked(key, LoopWarningMessage)
		return nil, nil
	}

	// Layer 2: the same tool too often; one call at a time, stopping at the first hit.
	for _, c := range last.ToolCalls {
		ts.names = append(ts.names, c.Name)
		if len(ts.names) > m.freqWindow {
			ts.names = ts.names[len(ts.names)-m.freqWindow:]
		}
		warn, hard := m.cfg.ToolFreqWarn, m.cfg.ToolFreqHardLimit
		if o, ok := m.cfg.ToolFreqOverrides[c.Name]; ok {
			warn, hard = o.Warn, o.HardLimit
		}
		cnt := count(ts.names, c.Name)
		if cnt < warn {
			delete(ts.warnedNames, c.Name) // decayed below the threshold: may warn again
		}
		if cnt >= hard {
			return m.hardStop(rt, last, fmt.Sprintf(loopToolHardFmt, c.Name, cnt)), nil
		}
		if cnt >= warn && !ts.warnedNames[c.Name] {
			ts.warnedNames[c.Name] = true
			m.queueLocked(key, fmt.Sprintf(loopToolWarnFmt, c.Name, cnt))
			return nil, nil
		}
	}
	return nil, nil
}

func (m *LoopDetectionMiddleware) hardStop(rt *agent.Runtime, last message.Message, notice string) *state.Update {
	up := hardStop(rt, last, agent.StopLoopCapped, notice)
	record(rt, "loop_detection", NameLoopDetection, "after_model", "hard_stop", map[string]any{"notice": notice})
	return up
}

// WrapModelCall appends the run's queued warnings to this request only, then drains them.
func (m *LoopDetectionMiddleware) WrapModelCall(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler) (*agent.ModelResponse, error) {
	m.mu.Lock()
	key := m.key(req.Runtime)
	warnings := m.pending[key]
	if len(warnings) > 0 {
		m.dropPendingLocked(key)
	}
	m.mu.Unlock()
	if len(warnings) == 0 {
		return next(ctx, req)
	}
	r := req.Request.Clone()
	r.Messages = append(r.Messages, hiddenHuman(message.NewID(), loopWarningName, strings.Join(warnings, "\n\n")))
	return next(ctx, req.WithRequest(r))
}
