package middleware

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// MemoryCaller is the caller tag of memory-update model calls.
const MemoryCaller = "middleware:memory"

// MemoryStore keeps one memory text per (user, agent). Safe for concurrent use.
type MemoryStore interface {
	Load(ctx context.Context, userID, agentName string) (string, error)
	Save(ctx context.Context, userID, agentName, memory string) error
}

// FileMemoryStore stores memory under <base>/users/<user>/memory/<agent>.md.
type FileMemoryStore struct {
	settings RuntimeSettings
	mu       sync.Mutex
}

// NewFileMemoryStore returns the store.
func NewFileMemoryStore(rs RuntimeSettings) *FileMemoryStore { return &FileMemoryStore{settings: rs} }

func (s *FileMemoryStore) path(userID, agentName string) (string, error) {
	if err := safeElement("user id", userID); err != nil {
		return "", err
	}
	if agentName == "" {
		agentName = genai.LeadAgentName
	}
	if err := safeElement("agent name", agentName); err != nil {
		return "", err
	}
	return filepath.Join(baseDir(s.settings), "users", userID, "memory", agentName+".md"), nil
}

// Load implements MemoryStore; a missing file is empty memory.
func (s *FileMemoryStore) Load(_ context.Context, userID, agentName string) (string, error) {
	p, err := s.path(userID, agentName)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read memory: %w", err)
	}
	return string(b), nil
}

// Save implements MemoryStore.
func (s *FileMemoryStore) Save(_ context.Context, userID, agentName, memory string) error {
	p, err := s.path(userID, agentName)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("write memory: %w", err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(memory), 0o600); err != nil {
		return fmt.Errorf("write memory: %w", err)
	}
	return os.Rename(tmp, p)
}

// MemoryMiddleware (after_agent, as DeerFlow's) hands the finished conversation to the
// memory updater: only user inputs and final AI answers are kept. With
// settings.memory.model_name set, a model call tagged middleware:memory rewrites the
// memory; without it the newest queue_batch_size exchanges are kept verbatim. DeerFlow
// debounces updates in a background queue; agentmeter updates synchronously at the end of
// the run so the memory call is accounted to the run that caused it. A failed update is
// journaled, never a run error.
type MemoryMiddleware struct {
	cfg    MemorySettings
	store  MemoryStore
	models *model.Factory
}

// NewMemoryMiddleware returns the middleware (the memory model must be configured).
func NewMemoryMiddleware(cfg MemorySettings, store MemoryStore, models *model.Factory) (*MemoryMiddleware, error) {
	if err := checkModelName(models, cfg.ModelName); err != nil {
		return nil, err
	}
	return &MemoryMiddleware{cfg: cfg, store: store, models: models}, nil
}

// Name implements agent.Middleware.
func (*MemoryMiddleware) Name() string { return NameMemory }

// MemoryPrompt is the instruction of the memory-update model call.
const MemoryPrompt = "You maintain a short memory of durable facts about the user (preferences, projects, context) for future conversations.\n<existing_memory>\n%s\n</existing_memory>\n<conversation>\n%s\n</conversation>\nReturn the updated memory as a short bullet list, nothing else."

// MemoryConversation filters messages to user inputs and final AI answers.
func MemoryConversation(msgs []message.Message) []message.Message {
	var out []message.Message
	for _, m := range msgs {
		switch {
		case m.IsHuman() && !isReminder(m) && m.Name != "todo_reminder" && m.Name != "loop_warning" && m.Name != "budget_warning":
			out = append(out, m)
		case m.IsAI() && len(m.ToolCalls) == 0 && strings.TrimSpace(m.Content) != "" && !kwargBool(m, message.KwargErrorFallback):
			out = append(out, m)
		}
	}
	return out
}

func renderConversation(msgs []message.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		role := "User"
		if m.IsAI() {
			role = "Assistant"
		}
		text := m.Content
		if orig, ok := m.AdditionalKwargs["original_user_content"].(string); ok && m.IsHuman() {
			text = orig
		}
		fmt.Fprintf(&b, "%s: %s\n", role, clipRunes(strings.TrimSpace(text), 1000))
	}
	return b.String()
}

// AfterAgent implements agent.AfterAgentHook.
func (m *MemoryMiddleware) AfterAgent(ctx context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	if !m.cfg.Enabled || rt == nil || rt.ThreadID == "" || len(st.Messages) == 0 || ctx.Err() != nil {
		return nil, nil
	}
	conv := MemoryConversation(st.Messages)
	if len(conv) == 0 {
		return nil, nil
	}
	user, agentName := userID(rt), rt.AgentName
	if err := m.update(ctx, rt, user, agentName, conv); err != nil {
		record(rt, "memory", NameMemory, "after_agent", "update_failed", map[string]any{"error": err.Error()})
		return nil, nil
	}
	record(rt, "memory", NameMemory, "after_agent", "updated", map[string]any{"messages": len(conv)})
	return nil, nil
}

func (m *MemoryMiddleware) update(ctx context.Context, rt *agent.Runtime, user, agentName string, conv []message.Message) error {
	prev, err := m.store.Load(ctx, user, agentName)
	if err != nil {
		return err
	}
	if m.cfg.ModelName == "" {
		// No memory model: keep the newest exchanges verbatim.
		lines := strings.Split(strings.TrimSpace(prev+"\n"+renderConversation(conv)), "\n")
		keep := 2 * m.cfg.QueueBatchSize
		if len(lines) > keep {
			lines = lines[len(lines)-keep:]
		}
		next := strings.Join(lines, "\n") + "\n"
		if next == prev {
			return nil // unchanged: skip the write (DeerFlow debounces memory updates)
		}
		return m.store.Save(ctx, user, agentName, next)
	}
	var cm model.ChatModel
	if m.models != nil {
		cm, err = m.models.Get(m.cfg.ModelName)
	} else if rt.Models != nil {
		cm, err = rt.Models.Get(m.cfg.ModelName)
	} else {
		err = fmt.Errorf("memory model %q: no model factory", m.cfg.ModelName)
	}
	if err != nil {
		return err
	}
	no := false
	resp, err := cm.Generate(ctx, &model.Request{
		Messages: []message.Message{message.Human(fmt.Sprintf(MemoryPrompt, strings.TrimSpace(prev), renderConversation(conv)))},
		Caller:   genai.MiddlewareCaller("memory"),
		Stream:   &no,
	})
	if err != nil {
		return fmt.Errorf("memory model: %w", err)
	}
	text := stripThink(resp.Message.Content)
	if text == "" {
		return errors.New("memory model returned no text")
	}
	return m.store.Save(ctx, user, agentName, text+"\n")
}
