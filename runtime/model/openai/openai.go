// Package openai is the OpenAI-compatible chat provider (official github.com/openai/openai-go
// SDK, Chat Completions API). It registers itself as provider "openai"; any endpoint that
// speaks the OpenAI Chat Completions protocol (DeepSeek, vLLM, Ollama's /v1, ...) works
// through base_url.
//
// Streaming requests send stream_options.include_usage=true unless the model config says
// stream_usage: false (DeerFlow's stream_usage default: on by default for every
// OpenAI-compatible endpoint, explicit false kept). Usage is taken from the chunk that
// carries it — normally the last one, with or without choices. Usage is normalised per
// docs/contract.md#usage: prompt_tokens already includes cached tokens (cache_read = cached_tokens,
// cache_creation = cache_write_tokens), completion_tokens already includes reasoning.
//
// The SDK's own retries are off (WithMaxRetries(0)): retry policy belongs to the
// LLMErrorHandling middleware, which sees *model.StatusError for HTTP failures.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
)

// ProviderName is the provider this package registers (gen_ai.provider.name).
const ProviderName = config.ProviderOpenAI

// DefaultAPIKeyEnv is read when the config names no api_key_env.
const DefaultAPIKeyEnv = "OPENAI_API_KEY"

func init() {
	model.Register(ProviderName, func(cfg config.Model) (model.Provider, error) { return New(cfg) })
}

// Provider calls one OpenAI-compatible model. Safe for concurrent use.
type Provider struct {
	client      oa.Client
	cfg         config.Model
	streamUsage bool
}

// New builds the provider. The API key comes from the variable named by api_key_env
// (default OPENAI_API_KEY); an explicitly named but empty variable is an error naming it.
// Without any key a custom base_url is allowed (local servers often need none).
func New(cfg config.Model) (*Provider, error) {
	if cfg.Model == "" {
		return nil, errors.New("model is required")
	}
	envName, key := cfg.APIKey(DefaultAPIKeyEnv)
	switch {
	case key == "" && cfg.APIKeyEnv != "":
		return nil, fmt.Errorf("api_key_env: environment variable %s is not set", cfg.APIKeyEnv)
	case key == "" && cfg.BaseURL == "":
		return nil, fmt.Errorf("api_key_env: environment variable %s is not set (or set base_url for a keyless local endpoint)", envName)
	case key == "":
		key = "unused" // the SDK always sends a bearer token; keyless servers ignore it
	}
	opts := []option.RequestOption{option.WithAPIKey(key), option.WithMaxRetries(0)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(strings.TrimRight(cfg.BaseURL, "/")+"/"))
	}
	return &Provider{client: oa.NewClient(opts...), cfg: cfg, streamUsage: cfg.StreamUsageEnabled()}, nil
}

// Params builds the Chat Completions request (exported for tests of the wire shape).
func (p *Provider) Params(req *model.Request) (oa.ChatCompletionNewParams, error) {
	params := oa.ChatCompletionNewParams{Model: shared.ChatModel(p.cfg.Model)}
	for _, m := range req.Messages {
		mp, err := messageParam(m)
		if err != nil {
			return params, err
		}
		params.Messages = append(params.Messages, mp)
	}
	for _, t := range req.Tools {
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(t.Parameters)}
		if t.Description != "" {
			fd.Description = oa.String(t.Description)
		}
		params.Tools = append(params.Tools, oa.ChatCompletionFunctionTool(fd))
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		params.ToolChoice = oa.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oa.String(req.ToolChoice)}
	default:
		params.ToolChoice = oa.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &oa.ChatCompletionNamedToolChoiceParam{
			Function: oa.ChatCompletionNamedToolChoiceFunctionParam{Name: req.ToolChoice}}}
	}
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = p.cfg.MaxTokens
	}
	if maxTokens > 0 {
		params.MaxTokens = oa.Int(int64(maxTokens))
	}
	temp := req.Temperature
	if temp == nil {
		temp = p.cfg.Temperature
	}
	if temp != nil {
		params.Temperature = oa.Float(*temp)
	}
	if req.ReasoningEffort != "" {
		params.ReasoningEffort = shared.ReasoningEffort(req.ReasoningEffort)
	}
	if req.StreamEnabled() && p.streamUsage {
		params.StreamOptions = oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)}
	}
	return params, nil
}

func messageParam(m message.Message) (oa.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case message.RoleSystem:
		return oa.SystemMessage(m.Content), nil
	case message.RoleHuman:
		return oa.UserMessage(m.Content), nil
	case message.RoleTool:
		return oa.ToolMessage(m.Content, m.ToolCallID), nil
	case message.RoleAI:
		ap := &oa.ChatCompletionAssistantMessageParam{}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			ap.Content = oa.ChatCompletionAssistantMessageParamContentUnion{OfString: oa.String(m.Content)}
		}
		for _, tc := range m.ToolCalls {
			args, err := json.Marshal(tc.Args)
			if err != nil {
				return oa.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool call %s arguments: %w", tc.ID, err)
			}
			if tc.Args == nil {
				args = []byte("{}")
			}
			ap.ToolCalls = append(ap.ToolCalls, oa.ChatCompletionMessageToolCallUnionParam{OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{
				ID: tc.ID, Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: string(args)}}})
		}
		return oa.ChatCompletionMessageParamUnion{OfAssistant: ap}, nil
	}
	return oa.ChatCompletionMessageParamUnion{}, fmt.Errorf("message %s: unsupported role %q", m.ID, m.Role)
}

// Generate implements model.Provider.
func (p *Provider) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	params, err := p.Params(req)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	if req.StreamEnabled() {
		return p.stream(ctx, params, req.OnDelta)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout())
	defer cancel()
	cc, err := p.client.Chat.Completions.New(ctx, params)
	if err != nil {
		return nil, wrapError(err)
	}
	if len(cc.Choices) == 0 {
		return nil, errors.New("openai: response has no choices")
	}
	ch := cc.Choices[0]
	agg := &aggregate{id: cc.ID, model: cc.Model, content: ch.Message.Content, finish: ch.FinishReason}
	if f, ok := ch.Message.JSON.ExtraFields["reasoning_content"]; ok {
		agg.reasoning = jsonString(f.Raw())
	}
	for i, tc := range ch.Message.ToolCalls {
		agg.call(int64(i), tc.ID, tc.Function.Name, tc.Function.Arguments)
	}
	if cc.JSON.Usage.Valid() {
		u := cc.Usage
		agg.usage = &u
	}
	return agg.response(p.cfg.Model), nil
}

func (p *Provider) stream(ctx context.Context, params oa.ChatCompletionNewParams, onDelta func(model.Delta)) (*model.Response, error) {
	// The timeout is per chunk (DeerFlow's stream_chunk_timeout): a long answer that
	// keeps streaming is never cut, a stalled one is.
	timeout := p.cfg.CallTimeout()
	ctx, watch := model.ChunkWatchdog(ctx, timeout)
	defer watch.Stop()
	s := p.client.Chat.Completions.NewStreaming(ctx, params)
	defer s.Close()
	agg := &aggregate{}
	for s.Next() {
		watch.Chunk()
		chunk := s.Current()
		if agg.id == "" {
			agg.id = chunk.ID
		}
		if chunk.Model != "" {
			agg.model = chunk.Model
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue // n > 1 is never requested
			}
			d := ch.Delta
			var reasoning string
			if f, ok := d.JSON.ExtraFields["reasoning_content"]; ok {
				reasoning = jsonString(f.Raw())
			}
			if d.Content != "" || reasoning != "" {
				agg.content += d.Content
				agg.reasoning += reasoning
				if onDelta != nil {
					onDelta(model.Delta{Content: d.Content, Reasoning: reasoning})
				}
			}
			for _, tc := range d.ToolCalls {
				agg.call(tc.Index, tc.ID, tc.Function.Name, tc.Function.Arguments)
			}
			if ch.FinishReason != "" {
				agg.finish = ch.FinishReason
			}
		}
		// Usage rides on the last chunk (choices empty, or — some compatible servers —
		// together with the final choice); a null usage field is not usage.
		if chunk.JSON.Usage.Valid() && chunk.JSON.Usage.Raw() != "null" {
			u := chunk.Usage
			agg.usage = &u
		}
	}
	if err := s.Err(); err != nil {
		return nil, model.StreamError(ctx, wrapError(err), timeout)
	}
	return agg.response(params.Model), nil
}

// aggregate collects one response from a completion or from stream chunks.
type aggregate struct {
	id, model, content, reasoning, finish string
	calls                                 map[int64]*partialCall
	usage                                 *oa.CompletionUsage
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

func (a *aggregate) call(index int64, id, name, args string) {
	if a.calls == nil {
		a.calls = map[int64]*partialCall{}
	}
	c, ok := a.calls[index]
	if !ok {
		c = &partialCall{}
		a.calls[index] = c
	}
	if id != "" {
		c.id = id
	}
	if name != "" {
		c.name = name
	}
	c.args.WriteString(args)
}

func (a *aggregate) response(requested string) *model.Response {
	ai := message.AI(a.content)
	idx := make([]int64, 0, len(a.calls))
	for i := range a.calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	var invalid []any
	for _, i := range idx {
		c := a.calls[i]
		args := map[string]any{}
		if raw := strings.TrimSpace(c.args.String()); raw != "" {
			if err := json.Unmarshal([]byte(raw), &args); err != nil {
				invalid = append(invalid, map[string]any{"id": c.id, "name": c.name, "args": raw, "error": err.Error()})
				args = map[string]any{}
			}
		}
		ai.ToolCalls = append(ai.ToolCalls, message.ToolCall{ID: c.id, Name: c.name, Args: args})
	}
	kw := map[string]any{}
	if a.reasoning != "" {
		kw["reasoning_content"] = a.reasoning
	}
	if len(invalid) > 0 {
		kw["invalid_tool_calls"] = invalid
	}
	if len(kw) > 0 {
		ai.AdditionalKwargs = kw
	}
	respModel := a.model
	if respModel == "" {
		respModel = requested
	}
	ai.ResponseMetadata = map[string]any{message.MetaModelName: respModel, message.MetaProvider: ProviderName}
	if a.id != "" {
		ai.ResponseMetadata[message.MetaResponseID] = a.id
	}
	if a.finish != "" {
		ai.ResponseMetadata[message.MetaFinishReason] = a.finish
	}
	if a.usage != nil {
		um := message.UsageFromGenAI(normalise(*a.usage))
		ai.UsageMetadata = &um
		if c, ok := providerCost(*a.usage); ok {
			ai.ResponseMetadata[message.MetaProviderCostUSD] = c
		}
	}
	resp := &model.Response{Message: ai, ID: a.id, Model: respModel}
	if a.finish != "" {
		resp.FinishReasons = []string{a.finish}
	}
	return resp
}

// providerCost reads the cost an OpenAI-compatible router reports with the usage
// (OpenRouter: usage.cost, USD); ok is false when there is none.
func providerCost(u oa.CompletionUsage) (float64, bool) {
	f, ok := u.JSON.ExtraFields["cost"]
	if !ok {
		return 0, false
	}
	var c float64
	if json.Unmarshal([]byte(f.Raw()), &c) != nil || c < 0 {
		return 0, false
	}
	return c, true
}

// normalise maps OpenAI usage onto docs/contract.md#usage (prompt_tokens already includes cache).
// DeepSeek reports its cache hits as prompt_cache_hit_tokens (part of prompt_tokens, next
// to prompt_cache_miss_tokens) instead of prompt_tokens_details.cached_tokens; it is read
// when the standard field is absent (DeerFlow's DeepSeek normalisation).
func normalise(u oa.CompletionUsage) genai.Usage {
	cacheRead := u.PromptTokensDetails.CachedTokens
	if cacheRead == 0 {
		if f, ok := u.JSON.ExtraFields["prompt_cache_hit_tokens"]; ok {
			var n int64
			if json.Unmarshal([]byte(f.Raw()), &n) == nil && n > 0 && n <= u.PromptTokens {
				cacheRead = n
			}
		}
	}
	return genai.Usage{
		Input: u.PromptTokens, Output: u.CompletionTokens,
		CacheRead:     cacheRead,
		CacheCreation: u.PromptTokensDetails.CacheWriteTokens,
		Reasoning:     u.CompletionTokensDetails.ReasoningTokens,
	}
}

func jsonString(raw string) string {
	var s string
	if json.Unmarshal([]byte(raw), &s) == nil {
		return s
	}
	return ""
}

// wrapError turns SDK API errors into *model.StatusError (the status code reachable with
// errors.As); the SDK error never includes the API key.
func wrapError(err error) error {
	var apiErr *oa.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = strings.TrimSpace(apiErr.Type)
		}
		return &model.StatusError{Provider: ProviderName, StatusCode: apiErr.StatusCode, Message: msg, Err: err}
	}
	return fmt.Errorf("openai: %w", err)
}
