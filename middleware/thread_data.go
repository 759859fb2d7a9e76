package middleware

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// ErrThreadIDRequired is DeerFlow's error when no thread id is known (DeerFlow's ThreadDataMiddleware).
//
//lint:ignore ST1005 DeerFlow's exact message, capital letter included
var ErrThreadIDRequired = errors.New("Thread ID is required in runtime context or config.configurable")

// DefaultUserID is the user bucket when the run has no user.
const DefaultUserID = "default"

// baseDir resolves settings.runtime.base_dir (default $TMPDIR/agentmeter).
func baseDir(rs RuntimeSettings) string {
	if rs.BaseDir != "" {
		return rs.BaseDir
	}
	return filepath.Join(os.TempDir(), "agentmeter")
}

// userID is DeerFlow's user bucket: the run's user id, else "default".
func userID(rt *agent.Runtime) string {
	if rt == nil || rt.UserID == "" {
		return DefaultUserID
	}
	return rt.UserID
}

// safeElement rejects ids that would escape their folder.
func safeElement(kind, v string) error {
	if v == "" || v == "." || v == ".." || strings.ContainsAny(v, `/\`) || v != filepath.Base(v) {
		return fmt.Errorf("%s %q is not a valid path element", kind, v)
	}
	return nil
}

// ThreadPaths computes <base>/users/<user>/threads/<thread>/user-data/{workspace,uploads,outputs}.
func ThreadPaths(rs RuntimeSettings, user, thread string) (state.ThreadData, error) {
	if err := safeElement("user id", user); err != nil {
		return state.ThreadData{}, err
	}
	if err := safeElement("thread id", thread); err != nil {
		return state.ThreadData{}, err
	}
	root := filepath.Join(baseDir(rs), "users", user, "threads", thread, "user-data")
	return state.ThreadData{
		WorkspacePath: filepath.Join(root, "workspace"),
		UploadsPath:   filepath.Join(root, "uploads"),
		OutputsPath:   filepath.Join(root, "outputs"),
	}, nil
}

// EnsureThreadDirs creates the thread folders (on first use under lazy init).
func EnsureThreadDirs(td state.ThreadData) error {
	for _, p := range []string{td.WorkspacePath, td.UploadsPath, td.OutputsPath} {
		if p == "" {
			continue
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("create thread folder: %w", err)
		}
	}
	return nil
}

// ThreadDataMiddleware computes the per-user, per-thread folders (before_agent) and stamps
// the incoming user message (DeerFlow's ThreadDataMiddleware). With lazy_init the folders are only
// computed; they are created on first use (sandbox acquisition, uploads).
type ThreadDataMiddleware struct {
	settings RuntimeSettings
	now      func() time.Time
}

// NewThreadDataMiddleware returns the middleware.
func NewThreadDataMiddleware(rs RuntimeSettings) *ThreadDataMiddleware {
	return &ThreadDataMiddleware{settings: rs, now: time.Now}
}

// Name implements agent.Middleware.
func (*ThreadDataMiddleware) Name() string { return NameThreadData }

// BeforeAgent implements agent.BeforeAgentHook.
func (m *ThreadDataMiddleware) BeforeAgent(_ context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	if rt == nil || rt.ThreadID == "" {
		return nil, ErrThreadIDRequired
	}
	td, err := ThreadPaths(m.settings, userID(rt), rt.ThreadID)
	if err != nil {
		return nil, err
	}
	if !m.settings.LazyInit {
		if err := EnsureThreadDirs(td); err != nil {
			return nil, err
		}
	}
	u := &state.Update{ThreadData: &td}
	if last, ok := lastMessage(st.Messages); ok && last.IsHuman() {
		stamped := last.Clone()
		if stamped.Name == "" {
			stamped.Name = "user-input"
		}
		if stamped.AdditionalKwargs == nil {
			stamped.AdditionalKwargs = map[string]any{}
		}
		if rt.RunID != "" {
			stamped.AdditionalKwargs["run_id"] = rt.RunID
		}
		stamped.AdditionalKwargs["timestamp"] = m.now().UTC().Format(time.RFC3339)
		u.Messages = []message.Message{stamped}
	}
	return u, nil
}
