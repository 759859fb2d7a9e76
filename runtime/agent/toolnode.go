package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

// toolNode runs every tool call of ai concurrently (bounded by ToolConcurrency), each
// inside its execute_tool span and the wrap_tool_call chain, then appends the
// ToolMessages and applies the updates in tool-call order. It reports whether a tool
// asked to end the run.
func (a *Agent) toolNode(ctx context.Context, rt *Runtime, st *state.State, ai message.Message) (bool, error) {
	calls := ai.ToolCalls
	out := make([]*ToolResponse, len(calls))
	snapshot := *st // tools see the state as it was when the node started
	var sem chan struct{}
	if a.cfg.ToolConcurrency > 0 {
		sem = make(chan struct{}, a.cfg.ToolConcurrency)
	}
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sem != nil {
				select {
				case sem <- struct{}{}:
					defer func() { <-sem }()
				case <-ctx.Done():
					out[i] = errorResponse(call, fmt.Errorf("cancelled before start: %w", ctx.Err()))
					return
				}
			}
			out[i] = a.runToolCall(ctx, rt, &snapshot, call)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("agent %s: tools: %w", a.cfg.Name, err)
	}
	var merged *state.Update
	msgs := make([]message.Message, 0, len(out))
	for _, r := range out {
		msgs = append(msgs, r.Message)
		if rt.Journal != nil {
			rt.Journal.OnToolEnd(r.Message)
		}
	}
	merged = &state.Update{Messages: msgs}
	for _, r := range out {
		merged = state.Merge(merged, r.Update)
	}
	*st = st.Apply(merged)
	return merged.JumpTo == state.JumpEnd, nil
}

// runToolCall runs one call in its span; it never returns nil.
func (a *Agent) runToolCall(ctx context.Context, rt *Runtime, st *state.State, call message.ToolCall) *ToolResponse {
	attrs := append(telemetry.CommonAttributes(ctx, rt.Caller),
		attribute.String(genai.AttrOperationName, genai.OpExecuteTool),
		attribute.String(genai.AttrToolName, call.Name),
		attribute.String(genai.AttrToolCallID, call.ID),
		attribute.String(genai.AttrToolType, genai.ToolTypeFunction),
	)
	ctx, span := telemetry.Tracer(ctx).Start(ctx, genai.SpanName(genai.OpExecuteTool, call.Name),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	defer span.End()
	t, _ := a.tools.Get(call.Name)
	req := &ToolRequest{Call: call, Tool: t, State: st, Runtime: rt}
	resp, err := a.safeToolChain(ctx, req)
	if err == nil && resp == nil {
		err = errors.New("tool chain returned no response")
	}
	if err != nil {
		resp = errorResponse(call, err)
		span.RecordError(err)
	}
	if resp.Message.ID == "" {
		resp.Message.ID = message.NewID()
	}
	for k, v := range resp.Attributes {
		span.SetAttributes(attribute.String(k, v))
	}
	if resp.Message.Status == message.ToolError {
		errType := resp.Attributes[genai.AttrErrorType]
		if errType == "" {
			errType = toolErrorType(err)
		}
		span.SetAttributes(attribute.String(genai.AttrErrorType, errType))
		span.SetStatus(codes.Error, truncate(resp.Message.Content, 256))
	}
	if telemetry.ContentCapture(ctx) {
		span.SetAttributes(attribute.String(genai.AttrToolCallResult, truncate(resp.Message.Content, 4096)))
	}
	return resp
}

// safeToolChain turns a panic inside a tool or wrapper into an error, so one bad tool
// cannot take the process down while its siblings run.
func (a *Agent) safeToolChain(ctx context.Context, req *ToolRequest) (resp *ToolResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, fmt.Errorf("tool %s panicked: %v", req.Call.Name, r)
		}
	}()
	return a.toolChain(ctx, req)
}

func toolErrorType(err error) string {
	var ae *tool.ArgError
	switch {
	case err == nil:
		return "tool_error"
	case errors.As(err, &ae):
		return "invalid_arguments"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	return "tool_error"
}

func errorResponse(call message.ToolCall, err error) *ToolResponse {
	return &ToolResponse{Message: message.Tool(call.ID, call.Name, "Error: "+err.Error(), message.ToolError)}
}

// callTool is the innermost tool handler: unknown tools and invalid arguments become
// error ToolMessages (LangChain's default ToolInvocationError handling); tool errors are
// returned so the wrap_tool_call chain sees them.
func (a *Agent) callTool(ctx context.Context, req *ToolRequest) (*ToolResponse, error) {
	call := req.Call
	if req.Tool == nil {
		return &ToolResponse{
			Message:    message.Tool(call.ID, call.Name, fmt.Sprintf("Error: %s is not a valid tool, try one of [%s].", call.Name, availableTools(a.tools)), message.ToolError),
			Attributes: map[string]string{genai.AttrErrorType: "unknown_tool"},
		}, nil
	}
	spec := req.Tool.Spec()
	args := call.Args
	if args == nil {
		args = map[string]any{}
	}
	if err := tool.ValidateArgs(spec, args); err != nil {
		return &ToolResponse{
			Message:    message.Tool(call.ID, call.Name, "Error: "+err.Error(), message.ToolError),
			Attributes: map[string]string{genai.AttrErrorType: "invalid_arguments"},
		}, nil
	}
	env := &tool.Env{
		ThreadID: req.Runtime.ThreadID, RunID: req.Runtime.RunID, UserID: req.Runtime.UserID,
		AgentName: req.Runtime.AgentName, State: req.State, Sandbox: req.Runtime.Sandbox,
		Emit: req.Runtime.Emit,
	}
	if req.Runtime.Journal != nil {
		env.Usage = journal.UsageRecorder(req.Runtime.Journal)
	}
	res, err := req.Tool.Call(ctx, tool.Call{ID: call.ID, Name: call.Name, Args: args, Env: env})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", call.Name, err)
	}
	msg := message.Tool(call.ID, call.Name, res.Content, res.Status)
	msg.AdditionalKwargs = res.AdditionalKwargs
	return &ToolResponse{Message: msg, Update: res.Update, Attributes: res.Attributes}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") // no character cut in two
}
