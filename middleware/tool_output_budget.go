package middleware

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/sandbox"
)

// ToolOutputBudget constants (as in DeerFlow).
const (
	toolResultsDir     = ".tool-results"
	fallbackTruncateAt = 30000
	fallbackHead       = 8000
	fallbackTail       = 3000
	synopsisPreview    = 2000
)

// ToolOutputConfig is the tool_output section.
type ToolOutputConfig struct {
	Enabled bool `yaml:"enabled"` // default true
	// MaxChars is the result size above which a result is offloaded (default 12000).
	MaxChars int `yaml:"max_chars"`
	// Overrides are per-tool limits; read_file is always exempt.
	Overrides map[string]int `yaml:"overrides"`
}

// DefaultToolOutputConfig returns DeerFlow's defaults.
func DefaultToolOutputConfig() ToolOutputConfig {
	return ToolOutputConfig{Enabled: true, MaxChars: 12000}
}

// Validate implements the config section contract.
func (c *ToolOutputConfig) Validate() error {
	var errs []error
	if c.MaxChars < 1 {
		errs = append(errs, errors.New("max_chars must be at least 1"))
	}
	for _, k := range slices.Sorted(maps.Keys(c.Overrides)) {
		if c.Overrides[k] < 1 {
			errs = append(errs, fmt.Errorf("overrides.%s must be at least 1", k))
		}
	}
	return errors.Join(errs...)
}

// ToolOutputBudgetMiddleware keeps large tool results out of the context: a result over
// its budget is saved under <workspace>/.tool-results/<tool_call_id>.txt and replaced by a
// synopsis with the path (the model reads it with read_file); when it cannot be saved,
// results over 30 000 characters keep their first 8 000 and last 3 000. In requests,
// oversized historical ToolMessages get the same head/tail truncation. read_file is exempt.
type ToolOutputBudgetMiddleware struct {
	cfg ToolOutputConfig
}

// NewToolOutputBudgetMiddleware returns the middleware.
func NewToolOutputBudgetMiddleware(cfg ToolOutputConfig) *ToolOutputBudgetMiddleware {
	return &ToolOutputBudgetMiddleware{cfg: cfg}
}

// Name implements agent.Middleware.
func (*ToolOutputBudgetMiddleware) Name() string { return NameToolOutputBudget }

func (m *ToolOutputBudgetMiddleware) limit(tool string) int {
	if n, ok := m.cfg.Overrides[tool]; ok {
		return n
	}
	return m.cfg.MaxChars
}

// HeadTail keeps the first head and last tail characters of s with a marker between.
func HeadTail(s string, head, tail int) string {
	r := []rune(s)
	if len(r) <= head+tail {
		return s
	}
	return string(r[:head]) + fmt.Sprintf("\n\n... [%d characters truncated] ...\n\n", len(r)-head-tail) + string(r[len(r)-tail:])
}

// WrapToolCall implements agent.WrapToolCallHook.
func (m *ToolOutputBudgetMiddleware) WrapToolCall(ctx context.Context, req *agent.ToolRequest, next agent.ToolHandler) (*agent.ToolResponse, error) {
	resp, err := next(ctx, req)
	if err != nil || resp == nil || !m.cfg.Enabled || req.Call.Name == "read_file" {
		return resp, err
	}
	content := resp.Message.Content
	size := len([]rune(content))
	if size <= m.limit(req.Call.Name) {
		return resp, nil
	}
	out := *resp
	out.Message = resp.Message.Clone()
	if ref, ok := m.offload(req, content); ok {
		out.Message.Content = fmt.Sprintf("[The %s result was %d characters, too large for the context. The full result was saved to %s; use read_file on that path (with start_line/end_line) for the parts you need.]\n\nBeginning of the result:\n%s",
			req.Call.Name, size, ref, clipRunes(content, synopsisPreview))
	} else if size > fallbackTruncateAt {
		out.Message.Content = HeadTail(content, fallbackHead, fallbackTail)
	} else {
		return resp, nil
	}
	if out.Message.AdditionalKwargs == nil {
		out.Message.AdditionalKwargs = map[string]any{}
	}
	out.Message.AdditionalKwargs["tool_output_budget"] = map[string]any{"original_chars": size}
	return &out, nil
}

// offload saves content in the thread workspace and returns its path as the model sees it.
func (m *ToolOutputBudgetMiddleware) offload(req *agent.ToolRequest, content string) (string, bool) {
	root := ""
	if req.Runtime != nil && req.Runtime.Sandbox != nil {
		root = req.Runtime.Sandbox.Root()
	} else if req.State != nil && req.State.ThreadData != nil {
		root = req.State.ThreadData.WorkspacePath
	}
	id := req.Call.ID
	if root == "" || safeElement("tool call id", id) != nil {
		return "", false
	}
	dir := filepath.Join(root, toolResultsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false
	}
	if err := os.WriteFile(filepath.Join(dir, id+".txt"), []byte(content), 0o600); err != nil {
		return "", false
	}
	return sandbox.VirtualRoot + "/" + toolResultsDir + "/" + id + ".txt", true
}

// WrapModelCall truncates oversized historical ToolMessages in the request.
func (m *ToolOutputBudgetMiddleware) WrapModelCall(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler) (*agent.ModelResponse, error) {
	if !m.cfg.Enabled {
		return next(ctx, req)
	}
	var r *model.Request
	for i, msg := range req.Request.Messages {
		if !msg.IsTool() || msg.Name == "read_file" || len(msg.Content) <= fallbackTruncateAt || len([]rune(msg.Content)) <= fallbackTruncateAt {
			continue
		}
		if r == nil {
			r = req.Request.Clone()
		}
		c := msg
		c.Content = HeadTail(msg.Content, fallbackHead, fallbackTail)
		r.Messages[i] = c
	}
	if r == nil {
		return next(ctx, req)
	}
	return next(ctx, req.WithRequest(r))
}
