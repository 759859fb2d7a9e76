package middleware

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/sandbox"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// SandboxProvider acquires and releases thread sandboxes (DeerFlow's SandboxProvider).
// Implementations must be safe for concurrent use.
type SandboxProvider interface {
	// Acquire returns the sandbox of (thread, user), creating it if needed.
	Acquire(ctx context.Context, threadID, userID string) (sandbox.Sandbox, error)
	// Get returns a sandbox acquired earlier by id.
	Get(id string) (sandbox.Sandbox, bool)
	// Release gives a sandbox back. What it does is provider-defined: the local provider
	// keeps it cached for reuse within the thread.
	Release(id string) error
}

// sandboxTools are the tools that need a sandbox; the first call of one acquires it lazily.
var sandboxTools = map[string]bool{"bash": true, "ls": true, "read_file": true, "write_file": true,
	"str_replace": true, "view_image": true, "present_files": true}

// LocalSandboxProvider keeps one local workspace per (user, thread) under
// <base>/users/<user>/threads/<thread>/user-data/workspace, cached for reuse.
type LocalSandboxProvider struct {
	settings RuntimeSettings
	mu       sync.Mutex
	byID     map[string]sandbox.Sandbox
	acquired int
	released int
}

// NewLocalSandboxProvider returns the provider.
func NewLocalSandboxProvider(rs RuntimeSettings) *LocalSandboxProvider {
	return &LocalSandboxProvider{settings: rs, byID: map[string]sandbox.Sandbox{}}
}

type localSandbox struct {
	*sandbox.Local
	id string
}

func (l localSandbox) ID() string { return l.id }

// Acquire implements SandboxProvider.
func (p *LocalSandboxProvider) Acquire(_ context.Context, threadID, userID string) (sandbox.Sandbox, error) {
	td, err := ThreadPaths(p.settings, userID, threadID)
	if err != nil {
		return nil, err
	}
	id := "local:" + userID + ":" + threadID
	p.mu.Lock()
	defer p.mu.Unlock()
	if sb, ok := p.byID[id]; ok {
		return sb, nil
	}
	if err := EnsureThreadDirs(td); err != nil {
		return nil, err
	}
	// sandbox.NewLocal(root, elem) uses root/elem/workspace: that is user-data/workspace.
	userData := filepath.Dir(td.WorkspacePath)
	l, err := sandbox.NewLocal(filepath.Dir(userData), filepath.Base(userData))
	if err != nil {
		return nil, err
	}
	sb := localSandbox{Local: l, id: id}
	p.byID[id] = sb
	p.acquired++
	return sb, nil
}

// Get implements SandboxProvider.
func (p *LocalSandboxProvider) Get(id string) (sandbox.Sandbox, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sb, ok := p.byID[id]
	return sb, ok
}

// Release implements SandboxProvider: the local sandbox stays cached for the thread's
// next turn (DeerFlow's local release is a no-op that keeps the cached sandbox).
func (p *LocalSandboxProvider) Release(id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.byID[id]; !ok {
		return fmt.Errorf("sandbox %q is not known to the local provider", id)
	}
	p.released++
	return nil
}

// Counts reports acquisitions and releases (for leak checks).
func (p *LocalSandboxProvider) Counts() (acquired, released int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acquired, p.released
}

// SandboxMiddleware manages the thread sandbox as DeerFlow's does: lazily acquired on
// the first sandbox tool call (lazy_init, the default) or in before_agent (eager), its id
// persisted in the sandbox state channel, and released in after_agent from the state or
// the run context — never leaked. A sandbox the embedder put on the Runtime is used as is
// and only its id is persisted.
type SandboxMiddleware struct {
	provider SandboxProvider
}

// eagerSandboxMiddleware adds the before_agent acquisition of lazy_init=false.
type eagerSandboxMiddleware struct{ *SandboxMiddleware }

// NewSandboxMiddleware returns the middleware; lazy=false adds the before_agent hook.
func NewSandboxMiddleware(p SandboxProvider, lazy bool) agent.Middleware {
	m := &SandboxMiddleware{provider: p}
	if lazy {
		return m
	}
	return eagerSandboxMiddleware{m}
}

// Name implements agent.Middleware.
func (*SandboxMiddleware) Name() string { return NameSandbox }

const sandboxRunKey = "middleware.sandbox"

// runSandbox is the run's sandbox slot; its mutex guards concurrent first tool calls.
// stopWatch cancels the cancellation watcher of a lazily acquired sandbox.
type runSandbox struct {
	mu        sync.Mutex
	sb        sandbox.Sandbox
	released  bool
	stopWatch func() bool
}

// release gives the slot's sandbox back once, whoever gets there first: after_agent, or
// the watcher when the run is cancelled (after_agent does not run then).
func (s *runSandbox) release(p SandboxProvider, id string) (bool, error) {
	s.mu.Lock()
	if s.released {
		s.mu.Unlock()
		return false, nil
	}
	s.released = true
	stop := s.stopWatch
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	return true, p.Release(id)
}

func (m *SandboxMiddleware) slot(rt *agent.Runtime) *runSandbox {
	return runScoped(rt, sandboxRunKey, func() *runSandbox { return &runSandbox{} })
}

// BeforeAgent acquires eagerly when the state has no sandbox and a thread id exists.
func (m eagerSandboxMiddleware) BeforeAgent(ctx context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	if (st.Sandbox != nil && st.Sandbox.SandboxID != "") || rt == nil || rt.ThreadID == "" {
		return nil, nil
	}
	sb, err := m.provider.Acquire(ctx, rt.ThreadID, userID(rt))
	if err != nil {
		return nil, fmt.Errorf("acquire sandbox: %w", err)
	}
	slot := m.slot(rt)
	slot.mu.Lock()
	slot.sb = sb
	slot.mu.Unlock()
	rt.Context.Set("sandbox_id", sb.ID())
	return &state.Update{Sandbox: &state.Sandbox{SandboxID: sb.ID()}}, nil
}

// WrapToolCall implements agent.WrapToolCallHook.
func (m *SandboxMiddleware) WrapToolCall(ctx context.Context, req *agent.ToolRequest, next agent.ToolHandler) (*agent.ToolResponse, error) {
	rt := req.Runtime
	hadID := req.State != nil && req.State.Sandbox != nil && req.State.Sandbox.SandboxID != ""
	if rt.Sandbox != nil {
		// Embedder-supplied sandbox: persist its id on first use.
		resp, err := next(ctx, req)
		if err == nil && resp != nil && !hadID {
			resp.Update = state.Merge(resp.Update, &state.Update{Sandbox: &state.Sandbox{SandboxID: rt.Sandbox.ID()}})
		}
		return resp, err
	}
	if !sandboxTools[req.Call.Name] {
		return next(ctx, req)
	}
	slot := m.slot(rt)
	slot.mu.Lock()
	acquiredNow := false
	if slot.sb == nil && hadID {
		if sb, ok := m.provider.Get(req.State.Sandbox.SandboxID); ok {
			slot.sb = sb
		}
	}
	if slot.sb == nil {
		sb, err := m.provider.Acquire(ctx, rt.ThreadID, userID(rt))
		if err != nil {
			slot.mu.Unlock()
			return nil, fmt.Errorf("acquire sandbox: %w", err)
		}
		slot.sb, acquiredNow = sb, true
		rt.Context.Set("sandbox_id", sb.ID())
		// A cancelled run skips after_agent: release the sandbox when the run's context
		// ends early, so it is never leaked.
		id := sb.ID()
		slot.stopWatch = context.AfterFunc(ctx, func() { _, _ = slot.release(m.provider, id) })
	}
	sb := slot.sb
	slot.mu.Unlock()

	withSB := *rt
	withSB.Sandbox = sb
	r2 := *req
	r2.Runtime = &withSB
	resp, err := next(ctx, &r2)
	if err == nil && resp != nil && (acquiredNow || !hadID) {
		resp.Update = state.Merge(resp.Update, &state.Update{Sandbox: &state.Sandbox{SandboxID: sb.ID()}})
	}
	return resp, err
}

// AfterAgent releases the sandbox named by the state, else by the run context.
func (m *SandboxMiddleware) AfterAgent(_ context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	id := ""
	if st.Sandbox != nil {
		id = st.Sandbox.SandboxID
	}
	if id == "" && rt != nil && rt.Context != nil {
		if v, ok := rt.Context.Get("sandbox_id"); ok {
			id, _ = v.(string)
		}
	}
	if id == "" {
		return nil, nil
	}
	if rt != nil && rt.Sandbox != nil && rt.Sandbox.ID() == id {
		return nil, nil // the embedder owns it
	}
	if _, ok := m.provider.Get(id); !ok {
		return nil, nil // restored from another provider/process: not ours to release
	}
	slot := m.slot(rt)
	slot.mu.Lock()
	mine := slot.sb != nil && slot.sb.ID() == id
	slot.mu.Unlock()
	if !mine {
		// Acquired in an earlier run of the thread (id from the state): a fresh slot.
		slot = &runSandbox{}
	}
	released, err := slot.release(m.provider, id)
	if err != nil {
		return nil, fmt.Errorf("release sandbox %s: %w", id, err)
	}
	if !released {
		return nil, nil
	}
	record(rt, "sandbox", NameSandbox, "after_agent", "release", map[string]any{"sandbox_id": id})
	return nil, nil
}
