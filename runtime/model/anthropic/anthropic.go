// Package anthropic is the Anthropic Messages API provider (official
// github.com/anthropics/anthropic-sdk-go/v2 SDK). It registers itself as provider
// "anthropic".
//
// Usage normalisation (docs/contract.md#usage): Anthropic reports input_tokens WITHOUT the cached
// part, so input = input_tokens + cache_read_input_tokens + cache_creation_input_tokens,
// with cache_read and cache_creation kept as the parts; output_tokens already includes
// thinking (reasoning = output_tokens_details.thinking_tokens). Streaming aggregates with
// the SDK's Message.Accumulate, whose message_delta usage is cumulative.
//
// The SDK's own retries are off; HTTP failures are *model.StatusError.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	an "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
)

// ProviderName is the provider this package registers (gen_ai.provider.name).
const ProviderName = config.ProviderAnthropic

// DefaultAPIKeyEnv is read when the config names no api_key_env.
const DefaultAPIKeyEnv = "ANTHROPIC_API_KEY"

// DefaultMaxTokens is sent when neither the request nor the config sets max_tokens (the
// Messages API requires it).
const DefaultMaxTokens = 4096

// Additional-kwargs keys for thinking blocks, replayed on later turns (the API requires
// the signed thinking block before a tool_use when thinking is on).
const (
	KwargThinking          = "reasoning_content"
	KwargThinkingSignature = "thinking_signature"
)

func init() {
	model.Register(ProviderName, func(cfg config.Model) (model.Provider, error) { return New(cfg) })
}

// Provider calls one Anthropic model. Safe for concurrent use.
type Provider struct {
	client an.Client
	cfg    config.Model
}

// New builds the provider; the key comes from api_key_env (default ANTHROPIC_API_KEY).
func New(cfg config.Model) (*Provider, error) {
	if cfg.Model == "" {
		return nil, errors.New("model is required")
	}
	envName, key := cfg.APIKey(DefaultAPIKeyEnv)
	if key == "" {
		return nil, fmt.Errorf("api_key_env: environment variable %s is not set", envName)
	}
	opts := []option.RequestOption{option.WithAPIKey(key), option.WithMaxRetries(0)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(strings.TrimRight(cfg.BaseURL, "/")+"/"))
	}
	return &Provider{client: an.NewClient(opts...), cfg: cfg}, nil
}

// Params builds the Messages API request (exported for tests of the wire shape).
func (p *Provider) Params(req *model.Request) (an.MessageNewParams, error) {
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = p.cfg.MaxTokens
	}
	if maxTokens == 0 {
		maxTokens = DefaultMaxTokens
	}
	params := an.MessageNewParams{Model: an.Model(p.cfg.Model), MaxTokens: int64(maxTokens)}
	var pendingResults []an.ContentBlockParamUnion
	flush := func() {
		if len(pendingResults) > 0 {
			params.Messages = append(params.Messages, an.NewUserMessage(pendingResults...))
			pendingResults = nil
		}
	}
	for _, m := range req.Messages {
		switch m.Role {
		case message.RoleSystem:
			params.System = append(params.System, an.TextBlockParam{Text: m.Content})
		case message.RoleTool:
			// Consecutive tool results go into one user turn, as the API requires.
			pendingResults = append(pendingResults, an.NewToolResultBlock(m.ToolCallID, m.Content, m.Status == message.ToolError))
		case message.RoleHuman:
			flush()
			params.Messages = append(params.Messages, an.NewUserMessage(an.NewTextBlock(m.Content)))
		case message.RoleAI:
			flush()
			var blocks []an.ContentBlockParamUnion
			if th, _ := m.AdditionalKwargs[KwargThinking].(string); th != "" {
				if sig, _ := m.AdditionalKwargs[KwargThinkingSignature].(string); sig != "" {
					blocks = append(blocks, an.NewThinkingBlock(sig, th))
				}
			}
			if m.Content != "" {
				blocks = append(blocks, an.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				args := tc.Args
				if args == nil {
					args = map[string]any{}
				}
				blocks = append(blocks, an.NewToolUseBlock(tc.ID, args, tc.Name))
			}
			if len(blocks) == 0 {
				blocks = append(blocks, an.NewTextBlock(""))
			}
			params.Messages = append(params.Messages, an.NewAssistantMessage(blocks...))
		default:
			return params, fmt.Errorf("message %s: unsupported role %q", m.ID, m.Role)
		}
	}
	flush()
	for _, t := range req.Tools {
		schema := an.ToolInputSchemaParam{Properties: t.Parameters["properties"]}
		switch r := t.Parameters["required"].(type) {
		case []string:
			schema.Required = r
		case []any:
			for _, x := range r {
				if s, ok := x.(string); ok {
					schema.Required = append(schema.Required, s)
				}
			}
		}
		tp := &an.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = an.String(t.Description)
		}
		params.Tools = append(params.Tools, an.ToolUnionParam{OfTool: tp})
	}
	switch req.ToolChoice {
	case "":
	case "auto":
		params.ToolChoice = an.ToolChoiceUnionParam{OfAuto: &an.ToolChoiceAutoParam{}}
	case "required":
		params.ToolChoice = an.ToolChoiceUnionParam{OfAny: &an.ToolChoiceAnyParam{}}
	case "none":
		params.ToolChoice = an.ToolChoiceUnionParam{OfNone: &an.ToolChoiceNoneParam{}}
	default:
		params.ToolChoice = an.ToolChoiceUnionParam{OfTool: &an.ToolChoiceToolParam{Name: req.ToolChoice}}
	}
	// The SDK (v2.15.0) offers no temperature on MessageNewParams; the setting is ignored
	// for this provider.
	if req.Thinking && p.cfg.SupportsThinking {
		budget := int64(maxTokens) / 2
		if budget < 1024 {
			budget = 1024
		}
		if budget < params.MaxTokens {
			params.Thinking = an.ThinkingConfigParamOfEnabled(budget)
		}
	}
	return params, nil
}

// Generate implements model.Provider.
func (p *Provider) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	params, err := p.Params(req)
	if err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	if !req.StreamEnabled() {
		ctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout())
		defer cancel()
		msg, err := p.client.Messages.New(ctx, params)
		if err != nil {
			return nil, wrapError(err)
		}
		return toResponse(msg, msg.JSON.Usage.Valid()), nil
	}
	// The timeout is per chunk (DeerFlow's stream_chunk_timeout).
	timeout := p.cfg.CallTimeout()
	ctx, watch := model.ChunkWatchdog(ctx, timeout)
	defer watch.Stop()
	s := p.client.Messages.NewStreaming(ctx, params)
	defer s.Close()
	acc := &an.Message{}
	sawUsage := false
	for s.Next() {
		watch.Chunk()
		ev := s.Current()
		if err := acc.Accumulate(ev); err != nil {
			return nil, fmt.Errorf("anthropic: stream: %w", err)
		}
		switch ev.Type {
		case "message_start":
			sawUsage = sawUsage || ev.Message.JSON.Usage.Valid()
		case "message_delta":
			sawUsage = sawUsage || ev.Usage.JSON.OutputTokens.Valid()
		case "content_block_delta":
			if req.OnDelta != nil {
				switch ev.Delta.Type {
				case "text_delta":
					req.OnDelta(model.Delta{Content: ev.Delta.Text})
				case "thinking_delta":
					req.OnDelta(model.Delta{Reasoning: ev.Delta.Thinking})
				}
			}
		}
	}
	if err := s.Err(); err != nil {
		return nil, model.StreamError(ctx, wrapError(err), timeout)
	}
	return toResponse(acc, sawUsage), nil
}

func toResponse(msg *an.Message, hasUsage bool) *model.Response {
	ai := message.AI("")
	var text strings.Builder
	kw := map[string]any{}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			kw[KwargThinking] = b.Thinking
			kw[KwargThinkingSignature] = b.Signature
		case "tool_use":
			args := map[string]any{}
			if len(b.Input) > 0 && json.Unmarshal(b.Input, &args) != nil {
				args = map[string]any{}
			}
			ai.ToolCalls = append(ai.ToolCalls, message.ToolCall{ID: b.ID, Name: b.Name, Args: args})
		}
	}
	ai.Content = text.String()
	if len(kw) > 0 {
		ai.AdditionalKwargs = kw
	}
	finish := string(msg.StopReason)
	ai.ResponseMetadata = map[string]any{message.MetaModelName: string(msg.Model), message.MetaProvider: ProviderName,
		message.MetaResponseID: msg.ID}
	if finish != "" {
		ai.ResponseMetadata[message.MetaFinishReason] = finish
	}
	if hasUsage {
		um := message.UsageFromGenAI(Normalise(msg.Usage))
		if h := msg.Usage.CacheCreation.Ephemeral1hInputTokens; h > 0 && um.InputTokenDetails != nil {
			um.InputTokenDetails.CacheCreation1h = h // priced at the 1-hour write rate (docs/cost.md)
		}
		ai.UsageMetadata = &um
	}
	resp := &model.Response{Message: ai, ID: msg.ID, Model: string(msg.Model)}
	if finish != "" {
		resp.FinishReasons = []string{finish}
	}
	return resp
}

// Normalise maps Anthropic usage onto docs/contract.md#usage: cached input is added into input.
func Normalise(u an.Usage) genai.Usage {
	return genai.Usage{
		Input:         u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		Output:        u.OutputTokens,
		CacheRead:     u.CacheReadInputTokens,
		CacheCreation: u.CacheCreationInputTokens,
		Reasoning:     u.OutputTokensDetails.ThinkingTokens,
	}
}

func wrapError(err error) error {
	var apiErr *an.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = http0(apiErr.StatusCode)
		}
		return &model.StatusError{Provider: ProviderName, StatusCode: apiErr.StatusCode, Message: msg, Err: err}
	}
	return fmt.Errorf("anthropic: %w", err)
}

func http0(code int) string { return fmt.Sprintf("status %d", code) }
