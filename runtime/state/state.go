// Package state is the thread state of one agent run (DeerFlow's ThreadState,
// deerflow/agents/thread_state.py) and the update value through which hooks and tools change it.
//
// It sits below runtime/agent, runtime/tool and middleware/ so that all three share one
// definition without importing each other.
//
// # Ownership
//
// The agent loop owns the State of a run. Hooks and tools receive it read-only (a pointer
// for speed, never to be mutated) and describe changes as an Update, which the loop
// applies with Apply before the next hook or node runs — the same "each hook is its own
// graph node" semantics as LangGraph (docs/runtime.md#middleware-hooks-runtimeagent). Nothing may keep a
// State pointer after the hook returns. State is not safe for concurrent mutation; the loop
// applies updates from one goroutine (concurrent tool calls return their Updates and the
// loop applies them in tool-call order).
package state

import (
	"maps"
	"slices"

	"github.com/agentmeter/agentmeter/runtime/message"
)

// Todo statuses accepted by write_todos (DeerFlow's todo normalisation).
const (
	TodoPending    = "pending"
	TodoInProgress = "in_progress"
	TodoCompleted  = "completed"
)

// Todo is one entry of the plan-mode todo list.
type Todo struct {
	Content string `json:"content"`
	Status  string `json:"status"`
}

// ThreadData are the per-thread folders (DeerFlow's thread_data channel). WorkspacePath
// is the sandbox root the file and shell tools are confined to.
type ThreadData struct {
	WorkspacePath string `json:"workspace_path"`
	UploadsPath   string `json:"uploads_path"`
	OutputsPath   string `json:"outputs_path"`
}

// Sandbox identifies the sandbox acquired for the thread (DeerFlow's sandbox channel).
type Sandbox struct {
	SandboxID string `json:"sandbox_id"`
}

// State is the state of one run. Extra holds channels the runtime itself does not
// interpret (viewed_images, delegations, summary_text, ...) under their DeerFlow names;
// values stored there must be treated as immutable (replace, never mutate in place).
type State struct {
	Messages   []message.Message `json:"messages"`
	Todos      []Todo            `json:"todos,omitempty"`
	Title      string            `json:"title,omitempty"`
	Sandbox    *Sandbox          `json:"sandbox,omitempty"`
	ThreadData *ThreadData       `json:"thread_data,omitempty"`
	Artifacts  []string          `json:"artifacts,omitempty"`
	Extra      map[string]any    `json:"extra,omitempty"`
}

// Jump targets of Update.JumpTo.
const (
	// JumpModel sends the loop straight back to the model node (after_model hooks may ask
	// for it; the remaining after_model hooks are skipped for that response).
	JumpModel = "model"
	// JumpEnd ends the run after the current node: no further model call; after_agent
	// hooks still run. ask_clarification uses it to interrupt the run.
	JumpEnd = "end"
)

// Update is a state change returned by a hook or a tool. Zero fields mean "no change".
// It is applied by Apply in this order: RemoveAll, RemoveMessageIDs, Messages (upsert by
// id), then the scalar channels.
type Update struct {
	// Messages are upserted by id (message.Upsert): same id replaces in place, new id
	// appends.
	Messages []message.Message
	// RemoveMessageIDs deletes messages (LangGraph RemoveMessage).
	RemoveMessageIDs []string
	// RemoveAll clears the list before Messages are added (RemoveMessage(REMOVE_ALL)).
	RemoveAll bool
	// Todos replaces the todo list when non-nil (an empty, non-nil slice clears it).
	Todos *[]Todo
	// Title replaces the title when non-nil.
	Title *string
	// Sandbox and ThreadData replace their channels when non-nil.
	Sandbox    *Sandbox
	ThreadData *ThreadData
	// Artifacts are appended, skipping paths already present (DeerFlow's merge_artifacts).
	Artifacts []string
	// Extra entries are set (a nil value deletes the key).
	Extra map[string]any
	// JumpTo is "", JumpModel or JumpEnd. See the agent package for where each is honoured.
	JumpTo string
}

// IsZero reports whether u changes nothing and jumps nowhere.
func (u *Update) IsZero() bool {
	return u == nil || (len(u.Messages) == 0 && len(u.RemoveMessageIDs) == 0 && !u.RemoveAll &&
		u.Todos == nil && u.Title == nil && u.Sandbox == nil && u.ThreadData == nil &&
		len(u.Artifacts) == 0 && len(u.Extra) == 0 && u.JumpTo == "")
}

// Apply returns the state with u applied. s is not mutated (slices and maps that change
// are copied), so a hook that kept a previous State value still sees the old one.
func (s State) Apply(u *Update) State {
	if u == nil {
		return s
	}
	msgs := s.Messages
	if u.RemoveAll {
		msgs = nil
	}
	msgs = message.Remove(msgs, u.RemoveMessageIDs...)
	if len(u.Messages) > 0 {
		msgs = message.Upsert(msgs, u.Messages...)
	}
	s.Messages = msgs
	if u.Todos != nil {
		s.Todos = slices.Clone(*u.Todos)
		if s.Todos == nil {
			s.Todos = []Todo{}
		}
	}
	if u.Title != nil {
		s.Title = *u.Title
	}
	if u.Sandbox != nil {
		sb := *u.Sandbox
		s.Sandbox = &sb
	}
	if u.ThreadData != nil {
		td := *u.ThreadData
		s.ThreadData = &td
	}
	if len(u.Artifacts) > 0 {
		arts := slices.Clone(s.Artifacts)
		for _, a := range u.Artifacts {
			if !slices.Contains(arts, a) {
				arts = append(arts, a)
			}
		}
		s.Artifacts = arts
	}
	if len(u.Extra) > 0 {
		extra := maps.Clone(s.Extra)
		if extra == nil {
			extra = map[string]any{}
		}
		for k, v := range u.Extra {
			if v == nil {
				delete(extra, k)
			} else {
				extra[k] = v
			}
		}
		s.Extra = extra
	}
	return s
}

// Merge folds b into a (b's scalar channels win, message lists concatenate), used when
// several tool calls of one response each return an update. JumpTo keeps JumpEnd if
// either asks for it.
func Merge(a, b *Update) *Update {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := *a
	out.Messages = append(slices.Clone(a.Messages), b.Messages...)
	out.RemoveMessageIDs = append(slices.Clone(a.RemoveMessageIDs), b.RemoveMessageIDs...)
	out.RemoveAll = a.RemoveAll || b.RemoveAll
	if b.Todos != nil {
		out.Todos = b.Todos
	}
	if b.Title != nil {
		out.Title = b.Title
	}
	if b.Sandbox != nil {
		out.Sandbox = b.Sandbox
	}
	if b.ThreadData != nil {
		out.ThreadData = b.ThreadData
	}
	out.Artifacts = append(slices.Clone(a.Artifacts), b.Artifacts...)
	if len(b.Extra) > 0 {
		out.Extra = maps.Clone(a.Extra)
		if out.Extra == nil {
			out.Extra = map[string]any{}
		}
		maps.Copy(out.Extra, b.Extra)
	}
	if a.JumpTo == JumpEnd || b.JumpTo == JumpEnd {
		out.JumpTo = JumpEnd
	} else if b.JumpTo != "" {
		out.JumpTo = b.JumpTo
	}
	return &out
}
