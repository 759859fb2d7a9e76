package middleware

import (
	"context"
	"errors"
	"fmt"
	"html"
	"strings"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// Summarization constants (DeerFlow's DeerFlowSummarizationMiddleware).
const (
	// SummaryTextKey is the summary_text state channel (state.Extra).
	SummaryTextKey = "summary_text"
	// SummarizeCaller is DeerFlow's tag for summary model calls.
	SummarizeCaller      = "middleware:summarize"
	NoHistorySummary     = "No previous conversation history."
	TooLongSummary       = "Previous conversation was too long to summarize."
	summaryContextName   = "summary_context"
	DefaultSummaryPrompt = "Summarize the conversation below for an assistant that will continue it. Keep facts, decisions, open tasks, file names and tool results that matter; drop chit-chat.\n\n{messages}\n\nReturn only the summary."
)

// SummarizationMiddleware compacts long histories (before_model): when the token count —
// messages plus the previous summary_text — reaches max_tokens_before_summary, everything
// before the last keep_messages messages is summarised by a model call tagged
// middleware:summarize (the configured summary model, then the run's model), except
// dynamic-context reminders and the latest user message, which are rescued. The summary
// goes to summary_text, not into messages; DurableContextMiddleware projects it into each
// request.
type SummarizationMiddleware struct {
	cfg    SummarizationConfig
	models *model.Factory
}

// NewSummarizationMiddleware validates cfg and returns the middleware.
func NewSummarizationMiddleware(cfg SummarizationConfig, models *model.Factory) (*SummarizationMiddleware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkModelName(models, cfg.ModelName); err != nil {
		return nil, err
	}
	if cfg.SummaryPrompt == "" {
		cfg.SummaryPrompt = DefaultSummaryPrompt
	}
	return &SummarizationMiddleware{cfg: cfg, models: models}, nil
}

// Name implements agent.Middleware.
func (*SummarizationMiddleware) Name() string { return NameSummarization }

func summaryText(st *state.State) string {
	s, _ := st.Extra[SummaryTextKey].(string)
	return s
}

// latestUser is the index of the latest real user message (by exact id: an older
// "__user" peer is not it).
func latestUser(msgs []message.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.IsHuman() && !isReminder(m) && m.Name != "summary" && m.Name != summaryContextName {
			return i
		}
	}
	return -1
}

// Partition returns the messages to summarise and the ones to keep (rescued first, in
// order), or ok=false when nothing would be summarised.
func (m *SummarizationMiddleware) Partition(msgs []message.Message) (toSummarize, keep []message.Message, ok bool) {
	cutoff := len(msgs) - m.cfg.KeepMessages
	// Never separate an AI message with tool calls from its ToolMessages.
	for cutoff > 0 && cutoff < len(msgs) && msgs[cutoff].IsTool() {
		cutoff--
	}
	if cutoff <= 0 {
		return nil, nil, false
	}
	user := latestUser(msgs)
	var rescued []message.Message
	for i, msg := range msgs[:cutoff] {
		if isReminder(msg) || i == user {
			rescued = append(rescued, msg)
			continue
		}
		toSummarize = append(toSummarize, msg)
	}
	if len(toSummarize) == 0 {
		return nil, nil, false
	}
	keep = append(rescued, msgs[cutoff:]...)
	return toSummarize, keep, true
}

// BeforeModel implements agent.BeforeModelHook.
func (m *SummarizationMiddleware) BeforeModel(ctx context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	if m.cfg.MaxTokensBeforeSummary <= 0 {
		return nil, nil // no trigger: never summarise automatically
	}
	prev := summaryText(st)
	tokens := approxTokens(st.Messages)
	if prev != "" {
		tokens += approxTokens([]message.Message{{Role: message.RoleHuman, Name: "summary", Content: prev}})
	}
	if tokens < m.cfg.MaxTokensBeforeSummary {
		return nil, nil
	}
	toSummarize, keep, ok := m.Partition(st.Messages)
	if !ok {
		return nil, nil
	}
	summary, err := m.summarize(ctx, rt, prev, toSummarize)
	if err != nil {
		record(rt, "summarization", NameSummarization, "before_model", "failed", map[string]any{"error": err.Error()})
		return nil, nil // all candidates failed: no compaction this turn
	}
	record(rt, "summarization", NameSummarization, "before_model", "compacted",
		map[string]any{"summarized": len(toSummarize), "kept": len(keep)})
	return &state.Update{RemoveAll: true, Messages: keep, Extra: map[string]any{SummaryTextKey: summary}}, nil
}

// BuildSummaryPrompt renders the prompt: the previous summary (tail kept) and the new
// messages (head kept) within the trim budget, HTML-escaped so content cannot break out
// of its block.
func (m *SummarizationMiddleware) BuildSummaryPrompt(prev string, msgs []message.Message) string {
	budget := 4 * m.cfg.TrimTokensToSummarize // characters
	buf := bufferString(msgs)
	if strings.TrimSpace(buf) == "" && prev == "" {
		return ""
	}
	newBudget, prevBudget := budget, 0
	if prev != "" {
		newBudget = budget / 2
		prevBudget = budget - newBudget
	}
	buf = boundChars(buf, newBudget, true)
	var b strings.Builder
	if prev != "" {
		b.WriteString("<existing_summary>\n" + html.EscapeString(boundChars(prev, prevBudget, false)) + "\n</existing_summary>\n")
	}
	b.WriteString("<new_messages>\n" + html.EscapeString(buf) + "\n</new_messages>")
	return strings.ReplaceAll(m.cfg.SummaryPrompt, "{messages}", b.String())
}

// boundChars keeps the head (keepHead) or the tail of s within n characters; the
// fallback for a head bound is head ⅔ + "\n...\n" + tail.
func boundChars(s string, n int, keepHead bool) string {
	r := []rune(s)
	if len(r) <= n || n <= 0 {
		if n <= 0 {
			return ""
		}
		return s
	}
	if !keepHead {
		return string(r[len(r)-n:])
	}
	head := 2 * n / 3
	tail := n - head - 5
	if tail < 0 {
		return string(r[:n])
	}
	return string(r[:head]) + "\n...\n" + string(r[len(r)-tail:])
}

func bufferString(msgs []message.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		role := map[message.Role]string{message.RoleHuman: "Human", message.RoleAI: "AI", message.RoleTool: "Tool", message.RoleSystem: "System"}[m.Role]
		fmt.Fprintf(&b, "%s: %s", role, m.Content)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, " [tool call %s %s]", c.Name, canonicalJSON(c.Args))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (m *SummarizationMiddleware) candidates(rt *agent.Runtime) []model.ChatModel {
	var out []model.ChatModel
	if m.cfg.ModelName != "" {
		f := m.models
		if f == nil && rt != nil {
			f = rt.Models
		}
		if f != nil {
			if cm, err := f.Get(m.cfg.ModelName); err == nil {
				out = append(out, cm)
			}
		}
	}
	if rt != nil && rt.Model != nil && (len(out) == 0 || out[0] != rt.Model) {
		out = append(out, rt.Model)
	}
	return out
}

// errSummaryFailed is returned when every candidate model failed.
var errSummaryFailed = errors.New("summarization: every summary model failed")

func (m *SummarizationMiddleware) summarize(ctx context.Context, rt *agent.Runtime, prev string, msgs []message.Message) (string, error) {
	if len(msgs) == 0 {
		return NoHistorySummary, nil
	}
	prompt := m.BuildSummaryPrompt(prev, msgs)
	if strings.TrimSpace(prompt) == "" {
		return TooLongSummary, nil
	}
	var errs []error
	for _, cm := range m.candidates(rt) {
		no := false
		resp, err := cm.Generate(ctx, &model.Request{
			Messages: []message.Message{message.Human(prompt)},
			Caller:   genai.MiddlewareCaller("summarize"),
			Stream:   &no,
		})
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			errs = append(errs, err)
			continue
		}
		if text := stripThink(resp.Message.Content); text != "" {
			return text, nil
		}
		errs = append(errs, errors.New("blank summary"))
	}
	return "", errors.Join(append([]error{errSummaryFailed}, errs...)...)
}
