package middleware

import (
	"context"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// Title constants (DeerFlow's TitleMiddleware).
const (
	// TitleCaller is the caller tag of the title model call.
	TitleCaller = "middleware:title"
	// NewConversationTitle is the fallback for an empty user message.
	NewConversationTitle = "New Conversation"
	titleFallbackLimit   = 50
	titlePromptClip      = 500
)

var thinkBlock = regexp.MustCompile(`(?s)<think>.*?</think>`)

// TitleMiddleware titles a thread after its first complete exchange (after_model): a model
// call tagged middleware:title (non-streaming) with the configured prompt, else — no model,
// a model error or an empty answer — the first 50 characters of the user message.
//
// Deviation: DeerFlow's async hook uses the local fallback when title.model_name is
// unset; here an unset model_name means the run's own model, so the title call (and its
// tokens in the middleware bucket) happens by default. See docs/middleware.md.
type TitleMiddleware struct {
	cfg    TitleConfig
	models *model.Factory
}

// NewTitleMiddleware validates cfg (title.model_name must be configured when set).
func NewTitleMiddleware(cfg TitleConfig, models *model.Factory) (*TitleMiddleware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkModelName(models, cfg.ModelName); err != nil {
		return nil, err
	}
	return &TitleMiddleware{cfg: cfg, models: models}, nil
}

// Name implements agent.Middleware.
func (*TitleMiddleware) Name() string { return NameTitle }

// isReminder reports DynamicContext reminder messages (not user turns).
func isReminder(m message.Message) bool { return kwargBool(m, KwargDynamicContextReminder) }

// ShouldGenerateTitle is DeerFlow's trigger: enabled, no title yet, at least two
// messages, exactly one real user message and at least one AI message.
func ShouldGenerateTitle(cfg TitleConfig, st *state.State) bool {
	if !cfg.Enabled || st.Title != "" || len(st.Messages) < 2 {
		return false
	}
	users, ais := 0, 0
	for _, m := range st.Messages {
		switch {
		case m.IsHuman() && !isReminder(m):
			users++
		case m.IsAI():
			ais++
		}
	}
	return users == 1 && ais >= 1
}

// AfterModel implements agent.AfterModelHook.
func (m *TitleMiddleware) AfterModel(ctx context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	if !ShouldGenerateTitle(m.cfg, st) {
		return nil, nil
	}
	user, assistant := titleInputs(st.Messages)
	title := m.generate(ctx, rt, user, assistant)
	return &state.Update{Title: &title}, nil
}

func titleInputs(msgs []message.Message) (user, assistant string) {
	for _, m := range msgs {
		switch {
		case m.IsHuman() && !isReminder(m) && user == "":
			user = m.Content
			if orig, ok := m.AdditionalKwargs["original_user_content"].(string); ok {
				user = orig
			}
		case m.IsAI() && assistant == "":
			assistant = m.Content
		}
	}
	return user, assistant
}

func (m *TitleMiddleware) titleModel(rt *agent.Runtime) model.ChatModel {
	if m.cfg.ModelName != "" {
		if m.models != nil {
			if cm, err := m.models.Get(m.cfg.ModelName); err == nil {
				return cm
			}
		}
		if rt != nil && rt.Models != nil {
			if cm, err := rt.Models.Get(m.cfg.ModelName); err == nil {
				return cm
			}
		}
		return nil
	}
	if rt != nil {
		return rt.Model
	}
	return nil
}

func (m *TitleMiddleware) generate(ctx context.Context, rt *agent.Runtime, user, assistant string) string {
	cm := m.titleModel(rt)
	if cm == nil {
		return FallbackTitle(user, m.cfg.MaxChars)
	}
	prompt := strings.NewReplacer(
		"{max_words}", strconv.Itoa(m.cfg.MaxWords),
		"{user_msg}", clipRunes(stripThink(user), titlePromptClip),
		"{assistant_msg}", clipRunes(stripThink(assistant), titlePromptClip),
	).Replace(m.cfg.PromptTemplate)
	no := false
	resp, err := cm.Generate(ctx, &model.Request{
		Messages: []message.Message{message.Human(prompt)},
		Caller:   genai.MiddlewareCaller("title"),
		Stream:   &no,
		Metadata: map[string]any{"run_name": "title_agent"},
	})
	if err != nil || resp == nil {
		record(rt, "title", NameTitle, "after_model", "fallback", map[string]any{"reason": "model_error"})
		return FallbackTitle(user, m.cfg.MaxChars)
	}
	if t := ParseTitle(resp.Message.Content, m.cfg.MaxChars); t != "" {
		return t
	}
	return FallbackTitle(user, m.cfg.MaxChars)
}

func stripThink(s string) string { return strings.TrimSpace(thinkBlock.ReplaceAllString(s, "")) }

// ParseTitle normalises a model answer: think blocks removed, trimmed, surrounding " then
// ' stripped, truncated to maxChars.
func ParseTitle(s string, maxChars int) string {
	s = stripThink(s)
	s = strings.Trim(s, `"`)
	s = strings.Trim(s, `'`)
	return clipRunes(strings.TrimSpace(s), maxChars)
}

// FallbackTitle is DeerFlow's local title: limit = min(max_chars, 50); a longer user text
// keeps its first min(limit, max_chars-3) characters, right-trimmed, plus "..."; empty →
// "New Conversation".
func FallbackTitle(user string, maxChars int) string {
	user = strings.TrimSpace(stripThink(user))
	if user == "" {
		return NewConversationTitle
	}
	limit := min(maxChars, titleFallbackLimit)
	if len([]rune(user)) > limit {
		return strings.TrimRight(clipRunes(user, min(limit, maxChars-3)), " \t\n") + "..."
	}
	return user
}
