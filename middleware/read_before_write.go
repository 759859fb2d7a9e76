package middleware

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/sandbox"
)

// KwargReadMark is the {path, sha256} stamp on a read_file result.
const KwargReadMark = "read_file_mark"

// ReadBeforeWriteMiddleware (wrap_tool_call) stamps every successful read_file result with
// the sha256 of the file, and blocks write_file on an existing file and str_replace unless
// the latest read of that file in the history matches its current content — the model must
// look at a file before overwriting it, and again after it changed. It fails open when the
// file cannot be inspected (as in DeerFlow).
type ReadBeforeWriteMiddleware struct{}

// NewReadBeforeWriteMiddleware returns the middleware.
func NewReadBeforeWriteMiddleware() *ReadBeforeWriteMiddleware { return &ReadBeforeWriteMiddleware{} }

// Name implements agent.Middleware.
func (*ReadBeforeWriteMiddleware) Name() string { return NameReadBeforeWrite }

func fileDigest(sb sandbox.Sandbox, path string) (abs, sum string, exists bool, ok bool) {
	if sb == nil || path == "" {
		return "", "", false, false
	}
	abs, err := sb.Resolve(path)
	if err != nil {
		return "", "", false, false
	}
	b, err := os.ReadFile(abs)
	if os.IsNotExist(err) {
		return abs, "", false, true
	}
	if err != nil {
		return "", "", false, false
	}
	h := sha256.Sum256(b)
	return abs, hex.EncodeToString(h[:]), true, true
}

// WrapToolCall implements agent.WrapToolCallHook.
func (*ReadBeforeWriteMiddleware) WrapToolCall(ctx context.Context, req *agent.ToolRequest, next agent.ToolHandler) (*agent.ToolResponse, error) {
	path, _ := req.Call.Args["path"].(string)
	var sb sandbox.Sandbox
	if req.Runtime != nil {
		sb = req.Runtime.Sandbox
	}
	switch req.Call.Name {
	case "read_file":
		resp, err := next(ctx, req)
		if err != nil || resp == nil || resp.Message.Status == message.ToolError {
			return resp, err
		}
		abs, sum, exists, ok := fileDigest(sb, path)
		if !ok || !exists {
			return resp, nil
		}
		out := *resp
		out.Message = resp.Message.WithKwarg(KwargReadMark, map[string]any{"path": abs, "sha256": sum})
		return &out, nil
	case "write_file", "str_replace":
		abs, sum, exists, ok := fileDigest(sb, path)
		if !ok || (!exists && req.Call.Name == "write_file") {
			return next(ctx, req) // new file, or uninspectable: fail open
		}
		if exists && latestReadMark(req, abs) == sum {
			return next(ctx, req)
		}
		reason := "it was not read in this conversation"
		if latestReadMark(req, abs) != "" {
			reason = "it changed since it was last read"
		}
		return &agent.ToolResponse{
			Message: message.Tool(req.Call.ID, req.Call.Name, fmt.Sprintf(
				"Error: %s on %s was blocked because %s. Read it with read_file first, then retry.", req.Call.Name, path, reason), message.ToolError),
			Attributes: map[string]string{"error.type": "read_before_write"},
		}, nil
	}
	return next(ctx, req)
}

// latestReadMark is the sha256 of the newest read_file mark for abs in the history.
func latestReadMark(req *agent.ToolRequest, abs string) string {
	if req.State == nil {
		return ""
	}
	for i := len(req.State.Messages) - 1; i >= 0; i-- {
		m := req.State.Messages[i]
		if !m.IsTool() || m.Name != "read_file" {
			continue
		}
		mark, _ := m.AdditionalKwargs[KwargReadMark].(map[string]any)
		if p, _ := mark["path"].(string); p == abs {
			s, _ := mark["sha256"].(string)
			return s
		}
	}
	return ""
}
