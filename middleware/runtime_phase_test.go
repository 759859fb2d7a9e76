package middleware

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/sandbox"
	"github.com/agentmeter/agentmeter/runtime/state"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

func TestThreadData(t *testing.T) {
	base := t.TempDir()
	m := NewThreadDataMiddleware(RuntimeSettings{BaseDir: base, LazyInit: true})
	rt := testRuntime()
	rt.UserID = "runtime-user"
	u, err := m.BeforeAgent(context.Background(), rt, st(human("h", "hello")))
	require.NoError(t, err)
	td := u.ThreadData
	assert.Equal(t, filepath.Join(base, "users", "runtime-user", "threads", "thread-1", "user-data", "workspace"), td.WorkspacePath)
	assert.True(t, strings.HasSuffix(td.UploadsPath, filepath.Join("threads", "thread-1", "user-data", "uploads")))
	assert.True(t, strings.HasSuffix(td.OutputsPath, filepath.Join("threads", "thread-1", "user-data", "outputs")))
	_, err = os.Stat(td.WorkspacePath)
	assert.True(t, os.IsNotExist(err), "lazy: paths only")
	stamped := u.Messages[0]
	assert.Equal(t, "h", stamped.ID)
	assert.Equal(t, "hello", stamped.Content)
	assert.Equal(t, "user-input", stamped.Name)
	assert.Equal(t, "run-1", stamped.AdditionalKwargs["run_id"])
	assert.NotEmpty(t, stamped.AdditionalKwargs["timestamp"])

	eager := NewThreadDataMiddleware(RuntimeSettings{BaseDir: base})
	u, err = eager.BeforeAgent(context.Background(), testRuntime(), st(aiMsg("a", "x")))
	require.NoError(t, err)
	assert.DirExists(t, u.ThreadData.UploadsPath, "eager creates the folders")
	assert.Empty(t, u.Messages, "no trailing human message: nothing stamped")
	assert.Contains(t, u.ThreadData.WorkspacePath, filepath.Join("users", "user-1", "threads"), "user bucket from the runtime")
	anon := testRuntime()
	anon.UserID = ""
	u, _ = eager.BeforeAgent(context.Background(), anon, st())
	assert.Contains(t, u.ThreadData.WorkspacePath, filepath.Join("users", DefaultUserID, "threads"))

	_, err = m.BeforeAgent(context.Background(), &agent.Runtime{Context: agent.NewRunContext()}, st())
	assert.EqualError(t, err, "Thread ID is required in runtime context or config.configurable")
	bad := testRuntime()
	bad.ThreadID = "../escape"
	_, err = m.BeforeAgent(context.Background(), bad, st())
	assert.ErrorContains(t, err, "not a valid path element")
}

func TestUploads(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.log"), []byte("\nline one\nline two\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "<b>.txt"), []byte("x"), 0o600))
	m := NewUploadsMiddleware()
	files := []any{
		map[string]any{"filename": "app.log", "size": 2048.0},
		map[string]any{"filename": "missing.txt", "size": 1},
		map[string]any{"filename": "../etc/passwd"},
		map[string]any{"filename": ".upload-123"},
		map[string]any{"filename": "<b>.txt"},
		"not a dict",
	}
	msg := human("h", "analyse this")
	msg.AdditionalKwargs = map[string]any{"files": files, "keep": "me"}
	s := st(msg)
	s.ThreadData = &state.ThreadData{UploadsPath: dir}
	u, err := m.BeforeAgent(context.Background(), testRuntime(), s)
	require.NoError(t, err)
	got := u.Extra[UploadedFilesKey].([]UploadedFile)
	assert.Equal(t, []UploadedFile{{Filename: "app.log", Size: 2048, Path: "/mnt/user-data/uploads/app.log"}, {Filename: "<b>.txt", Path: "/mnt/user-data/uploads/<b>.txt"}}, got)
	out := u.Messages[0]
	assert.Equal(t, "h", out.ID)
	assert.Equal(t, "me", out.AdditionalKwargs["keep"])
	assert.Equal(t, "analyse this", out.AdditionalKwargs["original_user_content"])
	assert.True(t, strings.HasPrefix(out.Content, "<current_uploads>"))
	assert.True(t, strings.HasSuffix(out.Content, "</current_uploads>\n\nanalyse this"))
	assert.Contains(t, out.Content, "app.log (2.0 KB)")
	assert.Contains(t, out.Content, "line one", "preview")
	assert.Contains(t, out.Content, "&lt;b&gt;.txt", "tags in filenames neutralised")
	assert.Contains(t, out.Content, "read_file")

	for _, s := range []*state.State{st(), st(aiMsg("a", "x")), st(human("h", "no files"))} {
		u, _ := m.BeforeAgent(context.Background(), testRuntime(), s)
		assert.Equal(t, []UploadedFile{}, u.Extra[UploadedFilesKey], "stale uploaded_files cleared")
		assert.Empty(t, u.Messages)
	}
	var many []any
	for i := range 12 {
		many = append(many, map[string]any{"filename": "f" + string(rune('a'+i)) + ".csv", "size": 0})
	}
	big := human("h", "q")
	big.AdditionalKwargs = map[string]any{"files": many}
	u, _ = m.BeforeAgent(context.Background(), testRuntime(), st(big))
	assert.Contains(t, u.Messages[0].Content, "... (2 more file(s) from this message omitted from this context.) Omitted by type: .csv: 2")
	assert.Contains(t, u.Messages[0].Content, "(empty)")
	assert.Equal(t, "2.0 MB", formatSize(2<<20))
}

func TestSandboxLazyAcquireAndRelease(t *testing.T) {
	p := NewLocalSandboxProvider(RuntimeSettings{BaseDir: t.TempDir()})
	m := NewSandboxMiddleware(p, true)
	_, isEager := m.(agent.BeforeAgentHook)
	assert.False(t, isEager, "lazy mode has no before_agent hook")
	wrap := m.(agent.WrapToolCallHook)
	rt := testRuntime()
	var seen []sandbox.Sandbox
	var mu sync.Mutex
	next := func(_ context.Context, req *agent.ToolRequest) (*agent.ToolResponse, error) {
		mu.Lock()
		seen = append(seen, req.Runtime.Sandbox)
		mu.Unlock()
		return &agent.ToolResponse{Message: message.Tool(req.Call.ID, req.Call.Name, "ok", "")}, nil
	}
	resp, err := wrap.WrapToolCall(context.Background(), &agent.ToolRequest{Call: call("c0", "web_search", nil), State: st(), Runtime: rt}, next)
	require.NoError(t, err)
	assert.Nil(t, seen[0], "non-sandbox tools do not acquire")
	assert.Nil(t, resp.Update)
	acq, _ := p.Counts()
	assert.Zero(t, acq)

	var wg sync.WaitGroup
	resps := make([]*agent.ToolResponse, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], _ = wrap.WrapToolCall(context.Background(), &agent.ToolRequest{Call: call("c", "bash", nil), State: st(), Runtime: rt}, next)
		}()
	}
	wg.Wait()
	acq, _ = p.Counts()
	assert.Equal(t, 1, acq, "concurrent first calls acquire once")
	id := resps[0].Update.Sandbox.SandboxID
	assert.Equal(t, "local:user-1:thread-1", id)
	assert.Equal(t, filepath.Join(p.settings.BaseDir, "users", "user-1", "threads", "thread-1", "user-data", "workspace"), seen[1].Root())
	assert.Nil(t, rt.Sandbox, "the shared runtime is not mutated")

	after := m.(agent.AfterAgentHook)
	_, err = after.AfterAgent(context.Background(), rt, st())
	require.NoError(t, err)
	_, rel := p.Counts()
	assert.Equal(t, 1, rel, "released from the run context when the state has none")
	s := st()
	s.Sandbox = &state.Sandbox{SandboxID: id}
	_, err = after.AfterAgent(context.Background(), rt, s)
	require.NoError(t, err)
	_, rel = p.Counts()
	assert.Equal(t, 1, rel, "released once per run")
	_, err = after.AfterAgent(context.Background(), testRuntime(), s)
	require.NoError(t, err)
	_, rel = p.Counts()
	assert.Equal(t, 2, rel, "a later run of the thread releases the id from the state")
	foreign := st()
	foreign.Sandbox = &state.Sandbox{SandboxID: "restored:parent"}
	_, err = after.AfterAgent(context.Background(), testRuntime(), foreign)
	require.NoError(t, err)
	_, rel = p.Counts()
	assert.Equal(t, 2, rel, "not ours: not released")
}

// A cancelled run skips after_agent; the lazily acquired sandbox is released anyway.
func TestSandboxReleasedOnCancellation(t *testing.T) {
	p := NewLocalSandboxProvider(RuntimeSettings{BaseDir: t.TempDir()})
	m := NewSandboxMiddleware(p, true)
	ctx, cancel := context.WithCancel(context.Background())
	rt := testRuntime()
	_, err := m.(agent.WrapToolCallHook).WrapToolCall(ctx, &agent.ToolRequest{Call: call("c", "ls", nil), State: st(), Runtime: rt},
		func(_ context.Context, req *agent.ToolRequest) (*agent.ToolResponse, error) {
			return &agent.ToolResponse{Message: message.Tool("c", "ls", "ok", "")}, nil
		})
	require.NoError(t, err)
	cancel()
	require.Eventually(t, func() bool { _, rel := p.Counts(); return rel == 1 }, 2*time.Second, 5*time.Millisecond)
	_, _ = m.(agent.AfterAgentHook).AfterAgent(context.Background(), rt, st())
	_, rel := p.Counts()
	assert.Equal(t, 1, rel, "never released twice")
}

func TestSandboxEagerAndEmbedderSupplied(t *testing.T) {
	p := NewLocalSandboxProvider(RuntimeSettings{BaseDir: t.TempDir()})
	m := NewSandboxMiddleware(p, false)
	u, err := m.(agent.BeforeAgentHook).BeforeAgent(context.Background(), testRuntime(), st())
	require.NoError(t, err)
	assert.Equal(t, "local:user-1:thread-1", u.Sandbox.SandboxID)

	sb, err := sandbox.NewLocal(t.TempDir(), "t")
	require.NoError(t, err)
	rt := testRuntime()
	rt.Sandbox = sb
	resp, err := m.(agent.WrapToolCallHook).WrapToolCall(context.Background(), &agent.ToolRequest{Call: call("c", "ls", nil), State: st(), Runtime: rt},
		func(_ context.Context, req *agent.ToolRequest) (*agent.ToolResponse, error) {
			assert.Same(t, sb, req.Runtime.Sandbox)
			return &agent.ToolResponse{Message: message.Tool("c", "ls", "ok", "")}, nil
		})
	require.NoError(t, err)
	assert.Equal(t, sb.ID(), resp.Update.Sandbox.SandboxID, "embedder sandbox id persisted")
}

func TestSandboxInRealLoopNeverLeaks(t *testing.T) {
	p := NewLocalSandboxProvider(RuntimeSettings{BaseDir: t.TempDir()})
	prov := &scriptedProvider{turns: []func(*modelRequest) (*modelResponse, error){
		reply(aiMsg("", "", call("c1", "write_file", map[string]any{"path": "a.txt", "content": "hi"}))),
		reply(aiMsg("", "", call("c2", "read_file", map[string]any{"path": "a.txt"}))),
		reply(aiMsg("", "done")),
	}}
	res := runAgent(t, prov, []agent.Middleware{NewSandboxMiddleware(p, true), NewToolErrorHandlingMiddleware()}, "go", tool.WriteFile{}, tool.ReadFile{})
	acq, rel := p.Counts()
	assert.Equal(t, 1, acq)
	assert.Equal(t, 1, rel, "released in after_agent")
	require.NotNil(t, res.State.Sandbox)
	var read string
	for _, msg := range res.State.Messages {
		if msg.IsTool() && msg.ToolCallID == "c2" {
			read = msg.Content
		}
	}
	assert.Contains(t, read, "hi", "the lazily acquired sandbox is reused by the next call")
}

func TestGuardrail(t *testing.T) {
	p, err := NewGuardrailProvider(GuardrailsConfig{Provider: "tool_policy", DenyTools: []string{"bash"}})
	require.NoError(t, err)
	m := NewGuardrailMiddleware(p, true)
	ran := 0
	next := func(_ context.Context, req *agent.ToolRequest) (*agent.ToolResponse, error) {
		ran++
		return &agent.ToolResponse{Message: message.Tool(req.Call.ID, req.Call.Name, "ok", "")}, nil
	}
	resp, err := m.WrapToolCall(context.Background(), &agent.ToolRequest{Call: call("c", "bash", nil), Runtime: testRuntime()}, next)
	require.NoError(t, err)
	assert.Zero(t, ran)
	assert.Equal(t, message.ToolError, resp.Message.Status)
	assert.Equal(t, "Guardrail denied: tool 'bash' was blocked (tool_denied). Reason: the tool is on the deny list. Choose an alternative approach.", resp.Message.Content)
	_, _ = m.WrapToolCall(context.Background(), &agent.ToolRequest{Call: call("c", "ls", nil), Runtime: testRuntime()}, next)
	assert.Equal(t, 1, ran)

	broken := guardFunc(func() (GuardrailDecision, error) { return GuardrailDecision{}, errors.New("provider down") })
	resp, _ = NewGuardrailMiddleware(broken, true).WrapToolCall(context.Background(), &agent.ToolRequest{Call: call("c", "ls", nil), Runtime: testRuntime()}, next)
	assert.Contains(t, resp.Message.Content, "guardrail_provider_error", "fail closed")
	_, _ = NewGuardrailMiddleware(broken, false).WrapToolCall(context.Background(), &agent.ToolRequest{Call: call("c", "ls", nil), Runtime: testRuntime()}, next)
	assert.Equal(t, 2, ran, "fail open")
}

type guardFunc func() (GuardrailDecision, error)

func (f guardFunc) Evaluate(context.Context, GuardrailRequest) (GuardrailDecision, error) { return f() }

func TestToolErrorHandling(t *testing.T) {
	m := NewToolErrorHandlingMiddleware()
	ok := func(_ context.Context, req *agent.ToolRequest) (*agent.ToolResponse, error) {
		return &agent.ToolResponse{Message: message.Tool(req.Call.ID, req.Call.Name, "fine", "")}, nil
	}
	resp, err := m.WrapToolCall(context.Background(), &agent.ToolRequest{Call: call("tc-42", "web_search", nil)}, ok)
	require.NoError(t, err)
	assert.Equal(t, "fine", resp.Message.Content)

	failing := func(context.Context, *agent.ToolRequest) (*agent.ToolResponse, error) {
		return nil, errors.New("network unreachable")
	}
	resp, err = m.WrapToolCall(context.Background(), &agent.ToolRequest{Call: call("tc-42", "web_search", nil)}, failing)
	require.NoError(t, err)
	assert.Equal(t, "tc-42", resp.Message.ToolCallID)
	assert.Equal(t, "web_search", resp.Message.Name)
	assert.Equal(t, message.ToolError, resp.Message.Status)
	assert.Equal(t, "Error: Tool 'web_search' failed with errorString: network unreachable. Continue with available context, or choose an alternative tool.", resp.Message.Content)
	meta := resp.Message.AdditionalKwargs["deerflow_tool_meta"].(map[string]any)
	assert.Equal(t, "error", meta["status"])
	assert.Equal(t, "exception", meta["source"])

	resp, _ = m.WrapToolCall(context.Background(), &agent.ToolRequest{Call: call("", "task", nil)}, failing)
	assert.Equal(t, MissingToolCallID, resp.Message.ToolCallID)
	assert.Equal(t, "failed", resp.Message.AdditionalKwargs[message.KwargSubagentStatus])

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = m.WrapToolCall(ctx, &agent.ToolRequest{Call: call("c", "bash", nil)}, func(ctx context.Context, _ *agent.ToolRequest) (*agent.ToolResponse, error) {
		return nil, ctx.Err()
	})
	assert.ErrorIs(t, err, context.Canceled, "cancellation is not swallowed")
}
