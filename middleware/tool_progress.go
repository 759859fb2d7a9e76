package middleware

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// ToolProgressConfig is the tool_progress section (opt-in).
type ToolProgressConfig struct {
	Enabled bool `yaml:"enabled"` // default false
	// StagnationThreshold consecutive near-identical results of one tool trigger a hint (3).
	StagnationThreshold int `yaml:"stagnation_threshold"`
	// Escalation more stagnant results after the hint block the tool for the run (2).
	Escalation int `yaml:"escalation"`
	// Similarity is the Jaccard similarity of result word sets counted as "no progress" (0.8).
	Similarity float64 `yaml:"similarity"`
}

// DefaultToolProgressConfig returns DeerFlow's defaults.
func DefaultToolProgressConfig() ToolProgressConfig {
	return ToolProgressConfig{StagnationThreshold: 3, Escalation: 2, Similarity: 0.8}
}

// Validate implements the config section contract.
func (c *ToolProgressConfig) Validate() error {
	var errs []error
	if c.StagnationThreshold < 1 {
		errs = append(errs, errors.New("stagnation_threshold must be at least 1"))
	}
	if c.Escalation < 1 {
		errs = append(errs, errors.New("escalation must be at least 1"))
	}
	if c.Similarity <= 0 || c.Similarity > 1 {
		errs = append(errs, errors.New("similarity must be in (0, 1]"))
	}
	return errors.Join(errs...)
}

const (
	toolProgressRunKey = "middleware.tool_progress"
	toolProgressName   = "tool_progress"
	toolProgressHint   = "[TOOL PROGRESS] The last %d results of %s were nearly identical: the tool is not making progress. Change its arguments, use another tool, or answer with what you have."
	toolProgressBlock  = "Error: %s is blocked for the rest of this run because its last %d results showed no progress. Use another approach or produce your answer."
)

type toolProgressState struct {
	last     map[string]bool // word set of the previous result
	stagnant int
	blocked  bool
}

type toolProgressRun struct {
	mu    sync.Mutex
	tools map[string]*toolProgressState
	hints []string
}

// ToolProgressMiddleware (opt-in) is a per-(run, tool) stagnation state machine:
// each result is compared with the previous result of the same tool (Jaccard similarity of
// word sets); stagnation_threshold near-identical results in a row queue a hint for the
// next request, escalation more block the tool for the rest of the run. It must be outer to
// ToolErrorHandling (DeerFlow asserts ToolProgress index < ToolErrorHandling index): then
// failing calls reach it as error ToolMessages and count like any other result, and its
// own block messages are not mistaken for tool exceptions.
type ToolProgressMiddleware struct {
	cfg ToolProgressConfig
}

// NewToolProgressMiddleware validates cfg and returns the middleware.
func NewToolProgressMiddleware(cfg ToolProgressConfig) (*ToolProgressMiddleware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &ToolProgressMiddleware{cfg: cfg}, nil
}

// Name implements agent.Middleware.
func (*ToolProgressMiddleware) Name() string { return NameToolProgress }

func (*ToolProgressMiddleware) run(rt *agent.Runtime) *toolProgressRun {
	return runScoped(rt, toolProgressRunKey, func() *toolProgressRun { return &toolProgressRun{tools: map[string]*toolProgressState{}} })
}

// BeforeAgent starts the run with fresh state.
func (m *ToolProgressMiddleware) BeforeAgent(_ context.Context, rt *agent.Runtime, _ *state.State) (*state.Update, error) {
	r := m.run(rt)
	r.mu.Lock()
	r.tools, r.hints = map[string]*toolProgressState{}, nil
	r.mu.Unlock()
	return nil, nil
}

func wordSet(s string) map[string]bool {
	set := map[string]bool{}
	for _, w := range strings.Fields(strings.ToLower(s)) {
		set[w] = true
	}
	return set
}

// Jaccard is |a∩b| / |a∪b| (1 for two empty sets).
func Jaccard(a, b map[string]bool) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	inter := 0
	for w := range a {
		if b[w] {
			inter++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// WrapToolCall implements agent.WrapToolCallHook.
func (m *ToolProgressMiddleware) WrapToolCall(ctx context.Context, req *agent.ToolRequest, next agent.ToolHandler) (*agent.ToolResponse, error) {
	r := m.run(req.Runtime)
	name := req.Call.Name
	r.mu.Lock()
	ts := r.tools[name]
	if ts != nil && ts.blocked {
		r.mu.Unlock()
		return &agent.ToolResponse{
			Message:    message.Tool(req.Call.ID, name, fmt.Sprintf(toolProgressBlock, name, m.cfg.StagnationThreshold+m.cfg.Escalation), message.ToolError),
			Attributes: map[string]string{"error.type": "tool_progress_blocked"},
		}, nil
	}
	r.mu.Unlock()
	resp, err := next(ctx, req)
	if err != nil || resp == nil {
		return resp, err
	}
	words := wordSet(resp.Message.Content)
	r.mu.Lock()
	defer r.mu.Unlock()
	if ts = r.tools[name]; ts == nil {
		ts = &toolProgressState{}
		r.tools[name] = ts
	}
	if ts.last != nil && Jaccard(ts.last, words) >= m.cfg.Similarity {
		ts.stagnant++
	} else {
		ts.stagnant = 0
	}
	ts.last = words
	switch {
	case ts.stagnant+1 >= m.cfg.StagnationThreshold+m.cfg.Escalation:
		ts.blocked = true
		record(req.Runtime, "tool_progress", NameToolProgress, "wrap_tool_call", "block", map[string]any{"tool": name})
	case ts.stagnant+1 == m.cfg.StagnationThreshold:
		r.hints = append(r.hints, fmt.Sprintf(toolProgressHint, m.cfg.StagnationThreshold, name))
	}
	return resp, nil
}

// WrapModelCall injects the queued hints into this request only.
func (m *ToolProgressMiddleware) WrapModelCall(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler) (*agent.ModelResponse, error) {
	r := m.run(req.Runtime)
	r.mu.Lock()
	hints := r.hints
	r.hints = nil
	r.mu.Unlock()
	if len(hints) == 0 {
		return next(ctx, req)
	}
	rq := req.Request.Clone()
	rq.Messages = append(rq.Messages, hiddenHuman(message.NewID(), toolProgressName, strings.Join(hints, "\n\n")))
	return next(ctx, req.WithRequest(rq))
}
