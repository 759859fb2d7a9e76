// Package scripted is a deterministic model driven by a script file: the responses, tool
// calls and usage numbers of every conversation are written down, so the runtime, its
// tests and the demo run offline with exact, reproducible token counts. It registers
// itself as provider "scripted"; an empty config.Model.Script selects the embedded demo
// script (demo.yaml).
//
// # Choosing a response
//
// A request is matched to the first conversation whose caller equals the request's
// caller tag (a trailing "*" matches a prefix) and whose first_human_contains (optional)
// is a substring of the request's first human message (messages flagged hide_from_ui,
// which middlewares inject, are skipped). The turn is the number of AI
// messages already in the request, so parallel subagents of one type — distinguished by
// their prompt — each walk their own conversation deterministically whatever the
// interleaving. A request past the last turn of its conversation is an error naming the
// conversation, as is a request no conversation matches.
package scripted

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
)

// ProviderName is the provider this package registers.
const ProviderName = config.ProviderScripted

// DefaultModelName is the model id used when the config names none.
const DefaultModelName = "scripted-demo"

//go:embed demo.yaml
var demoScript []byte

// DemoScript returns the embedded demo script.
func DemoScript() []byte { return append([]byte(nil), demoScript...) }

func init() {
	model.Register(ProviderName, func(cfg config.Model) (model.Provider, error) {
		data := demoScript
		if cfg.Script != "" {
			b, err := os.ReadFile(cfg.Script)
			if err != nil {
				return nil, fmt.Errorf("script: %w", err)
			}
			data = b
		}
		s, err := Parse(data)
		if err != nil {
			return nil, fmt.Errorf("script %q: %w", cfg.Script, err)
		}
		name := cfg.Model
		if name == "" {
			name = DefaultModelName
		}
		return New(s, name), nil
	})
}

// Script is a parsed script file.
type Script struct {
	Conversations []Conversation `yaml:"conversations"`
}

// Conversation is the scripted side of one conversation.
type Conversation struct {
	Name               string `yaml:"name"`
	Caller             string `yaml:"caller"`
	FirstHumanContains string `yaml:"first_human_contains"`
	// PerUserMessage counts the turn from the latest user message (a human message not
	// flagged hide_from_ui) instead of the start: every run of a thread that continues
	// its history replays the turns from the first.
	PerUserMessage bool   `yaml:"per_user_message"`
	Turns          []Turn `yaml:"turns"`
}

// Turn is one scripted response (or error).
type Turn struct {
	Content      string         `yaml:"content"`
	Reasoning    string         `yaml:"reasoning"`
	ToolCalls    []ScriptedCall `yaml:"tool_calls"`
	Usage        *Usage         `yaml:"usage"`
	FinishReason string         `yaml:"finish_reason"`
	Model        string         `yaml:"model"` // response model; default the configured model
	Delay        time.Duration  `yaml:"delay"` // wait before answering (honours cancellation)
	Error        *ScriptedError `yaml:"error"`
}

// ScriptedCall is one tool call of a turn. An empty ID gets "call_<conversation>_<turn>_<i>".
type ScriptedCall struct {
	ID   string         `yaml:"id"`
	Name string         `yaml:"name"`
	Args map[string]any `yaml:"args"`
}

// Usage is a turn's usage, normalised as docs/contract.md#usage (input includes cache).
type Usage struct {
	Input         int64 `yaml:"input"`
	Output        int64 `yaml:"output"`
	CacheRead     int64 `yaml:"cache_read"`
	CacheCreation int64 `yaml:"cache_creation"`
	Reasoning     int64 `yaml:"reasoning"`
}

// ScriptedError makes a turn fail like a backend error.
type ScriptedError struct {
	Status  int    `yaml:"status"`
	Message string `yaml:"message"`
}

// Parse decodes and validates a script (unknown keys are errors).
func Parse(data []byte) (*Script, error) {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	var errs []error
	if len(s.Conversations) == 0 {
		errs = append(errs, errors.New("conversations: at least one is required"))
	}
	for i, c := range s.Conversations {
		at := fmt.Sprintf("conversations[%d]", i)
		if c.Name == "" {
			errs = append(errs, fmt.Errorf("%s.name is required", at))
		}
		if c.Caller == "" {
			errs = append(errs, fmt.Errorf("%s.caller is required", at))
		}
		if len(c.Turns) == 0 {
			errs = append(errs, fmt.Errorf("%s.turns: at least one is required", at))
		}
		for j, t := range c.Turns {
			tat := fmt.Sprintf("%s.turns[%d]", at, j)
			for k, tc := range t.ToolCalls {
				if tc.Name == "" {
					errs = append(errs, fmt.Errorf("%s.tool_calls[%d].name is required", tat, k))
				}
			}
			if u := t.Usage; u != nil && (u.Input < 0 || u.Output < 0 || u.CacheRead+u.CacheCreation > u.Input || u.Reasoning > u.Output) {
				errs = append(errs, fmt.Errorf("%s.usage: counts must be non-negative, cache within input and reasoning within output", tat))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &s, nil
}

// Model is the scripted provider; safe for concurrent use (it holds no mutable state).
type Model struct {
	script *Script
	name   string
}

// New returns a scripted provider answering as model name.
func New(s *Script, name string) *Model { return &Model{script: s, name: name} }

// Generate implements model.Provider.
func (m *Model) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	caller := req.Caller
	if caller == "" {
		caller = telemetry.CallerFrom(ctx)
	}
	first := ""
	turn, sinceUser := 0, 0
	for _, msg := range req.Messages {
		if msg.Role == message.RoleHuman {
			// Hidden human messages (memory, reminders, durable context injected by
			// middlewares) are not the user's: they neither pick the conversation nor
			// restart a per_user_message one.
			if hidden, _ := msg.AdditionalKwargs["hide_from_ui"].(bool); !hidden {
				if first == "" {
					first = msg.Content
				}
				sinceUser = 0
			}
		}
		if msg.Role == message.RoleAI {
			turn++
			sinceUser++
		}
	}
	conv := m.match(caller, first)
	if conv == nil {
		return nil, fmt.Errorf("scripted: no conversation for caller %q and first message %q", caller, clip(first, 80))
	}
	if conv.PerUserMessage {
		turn = sinceUser
	}
	if turn >= len(conv.Turns) {
		return nil, fmt.Errorf("scripted: conversation %q has %d turns, request is turn %d", conv.Name, len(conv.Turns), turn+1)
	}
	t := conv.Turns[turn]
	if t.Delay > 0 {
		timer := time.NewTimer(t.Delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if t.Error != nil {
		return nil, &model.StatusError{Provider: ProviderName, StatusCode: t.Error.Status, Message: t.Error.Message}
	}
	respModel := t.Model
	if respModel == "" {
		respModel = m.name
	}
	finish := t.FinishReason
	if finish == "" {
		finish = "stop"
		if len(t.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	id := fmt.Sprintf("scripted-%s-%d", conv.Name, turn+1)
	ai := message.AI(t.Content)
	for i, tc := range t.ToolCalls {
		callID := tc.ID
		if callID == "" {
			callID = fmt.Sprintf("call_%s_%d_%d", conv.Name, turn+1, i+1)
		}
		ai.ToolCalls = append(ai.ToolCalls, message.ToolCall{ID: callID, Name: tc.Name, Args: cloneArgs(tc.Args)})
	}
	if t.Usage != nil {
		um := message.UsageFromGenAI(genai.Usage{Input: t.Usage.Input, Output: t.Usage.Output,
			CacheRead: t.Usage.CacheRead, CacheCreation: t.Usage.CacheCreation, Reasoning: t.Usage.Reasoning})
		ai.UsageMetadata = &um
	}
	if t.Reasoning != "" {
		ai.AdditionalKwargs = map[string]any{"reasoning_content": t.Reasoning}
	}
	ai.ResponseMetadata = map[string]any{
		message.MetaModelName: respModel, message.MetaFinishReason: finish,
		message.MetaResponseID: id, message.MetaProvider: ProviderName,
	}
	if req.OnDelta != nil && req.StreamEnabled() {
		if t.Reasoning != "" {
			req.OnDelta(model.Delta{Reasoning: t.Reasoning})
		}
		for _, w := range strings.SplitAfter(t.Content, " ") {
			if w != "" {
				req.OnDelta(model.Delta{Content: w})
			}
		}
	}
	return &model.Response{Message: ai, ID: id, Model: respModel, FinishReasons: []string{finish}}, nil
}

func (m *Model) match(caller, first string) *Conversation {
	for i := range m.script.Conversations {
		c := &m.script.Conversations[i]
		ok := c.Caller == caller || (strings.HasSuffix(c.Caller, "*") && strings.HasPrefix(caller, strings.TrimSuffix(c.Caller, "*")))
		if ok && (c.FirstHumanContains == "" || strings.Contains(first, c.FirstHumanContains)) {
			return c
		}
	}
	return nil
}

// cloneArgs deep-copies YAML-decoded args and converts ints to float64, so tools see the
// same value types as from a JSON-speaking provider.
func cloneArgs(in map[string]any) map[string]any {
	if in == nil {
		return map[string]any{}
	}
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = normalise(v)
	}
	return out
}

func normalise(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneArgs(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalise(e)
		}
		return out
	case int:
		return float64(x)
	case int64:
		return float64(x)
	}
	return v
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..." // no character cut in two
}

// ModelName is the model id this provider answers as.
func (m *Model) ModelName() string { return m.name }
