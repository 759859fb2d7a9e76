package middleware

import (
	"context"
	"regexp"
	"strings"
	"time"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// DynamicContext keys (DeerFlow's DynamicContextMiddleware).
const (
	KwargDynamicContextReminder = "dynamic_context_reminder"
	KwargReminderDate           = "reminder_date"
	dynamicContextTimeout       = 5 * time.Second
)

var legacyDate = regexp.MustCompile(`<current_date>(\d{4}-\d{2}-\d{2})`)

// DynamicContextMiddleware (before_agent) injects the current date — and the user's
// memory when settings.memory.injection_enabled — as reminder messages by ID swap: the
// SystemMessage reminder takes the user message's id and the user message is re-emitted
// as <id>__user, so the reminder sits right before the turn it belongs to. Reminders
// carry dynamic_context_reminder, which summarization preserves and title ignores.
type DynamicContextMiddleware struct {
	clock  Clock
	store  MemoryStore
	memory MemorySettings
}

// NewDynamicContextMiddleware returns the middleware.
func NewDynamicContextMiddleware(clock Clock, store MemoryStore, mem MemorySettings) *DynamicContextMiddleware {
	if clock == nil {
		clock = SystemClock{}
	}
	return &DynamicContextMiddleware{clock: clock, store: store, memory: mem}
}

// Name implements agent.Middleware.
func (*DynamicContextMiddleware) Name() string { return NameDynamicContext }

// DateReminder is the reminder text for day t.
func DateReminder(t time.Time) string {
	return "<system-reminder>\n<current_date>" + t.Format("2006-01-02") + ", " + t.Weekday().String() + "</current_date>\n</system-reminder>"
}

// lastInjectedDate finds the date of the newest reminder (reminder_date, else the legacy
// <current_date> of a SystemMessage).
func lastInjectedDate(msgs []message.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if isReminder(m) {
			if d := kwargString(m, KwargReminderDate); d != "" {
				return d
			}
		}
		if m.IsSystem() {
			if mm := legacyDate.FindStringSubmatch(m.Content); mm != nil {
				return mm[1]
			}
		}
	}
	return ""
}

// reminderTarget is the last human message that is a real user turn.
func reminderTarget(msgs []message.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.IsHuman() && !isReminder(m) && m.Name != "summary" && !strings.HasSuffix(m.ID, "__user") {
			return i
		}
	}
	return -1
}

// BeforeAgent implements agent.BeforeAgentHook.
func (m *DynamicContextMiddleware) BeforeAgent(ctx context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	msgs := st.Messages
	today := m.clock.Now().Format("2006-01-02")
	prev := lastInjectedDate(msgs)
	if prev == today {
		return nil, nil
	}
	target := reminderTarget(msgs)
	if target < 0 {
		return nil, nil
	}
	// Only the first injection of a thread carries the memory block; a date change
	// (midnight) gets a date-only reminder.
	memory := ""
	if prev == "" && m.memory.Enabled && m.memory.InjectionEnabled && m.store != nil {
		memory = m.loadMemory(ctx, rt)
	}
	user := msgs[target].Clone()
	id := user.ID
	if id == "" {
		id = message.NewID()
	}
	reminder := message.Message{ID: id, Role: message.RoleSystem, Content: DateReminder(m.clock.Now()),
		AdditionalKwargs: map[string]any{"hide_from_ui": true, KwargDynamicContextReminder: true, KwargReminderDate: today}}
	injected := []message.Message{reminder}
	if memory != "" {
		mem := hiddenHuman(id+"__memory", "", "<memory>\n"+memory+"\n</memory>")
		mem.AdditionalKwargs[KwargDynamicContextReminder] = true
		injected = append(injected, mem)
	}
	user.ID = id + "__user"
	injected = append(injected, user)
	out := make([]message.Message, 0, len(msgs)+2)
	out = append(out, msgs[:target]...)
	out = append(out, injected...)
	out = append(out, msgs[target+1:]...)
	return &state.Update{RemoveAll: true, Messages: out}, nil
}

func (m *DynamicContextMiddleware) loadMemory(ctx context.Context, rt *agent.Runtime) string {
	ctx, cancel := context.WithTimeout(ctx, dynamicContextTimeout)
	defer cancel()
	agentName := ""
	if rt != nil {
		agentName = rt.AgentName
	}
	mem, err := m.store.Load(ctx, userID(rt), agentName)
	if err != nil || strings.TrimSpace(mem) == "" {
		return ""
	}
	mem = strings.TrimSpace(mem)
	if rt != nil && rt.Journal != nil {
		rt.Journal.RecordMemoryContext(mem)
	}
	return neutraliseTags(mem)
}
