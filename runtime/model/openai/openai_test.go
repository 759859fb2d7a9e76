package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/model/internal/providertest"
)

// apiPath is where the provider sends its requests.
const apiPath = "/v1/chat/completions"

func sse(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func start(t *testing.T, f *providertest.Server, mutate func(*config.Model)) (*Provider, model.ChatModel) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Setenv("TEST_OPENAI_KEY", "sk-test-secret")
	cfg := config.Model{Name: "main", Provider: ProviderName, Model: "gpt-4o-mini", BaseURL: srv.URL + "/v1", APIKeyEnv: "TEST_OPENAI_KEY"}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(cfg)
	require.NoError(t, err)
	return p, model.Wrap(p, model.InfoFromConfig(cfg))
}

var conversation = []message.Message{
	message.System("be brief"),
	message.Human("weather?"),
	{ID: "a1", Role: message.RoleAI, ToolCalls: []message.ToolCall{{ID: "call_1", Name: "web_search", Args: map[string]any{"query": "paris"}}}},
	message.Tool("call_1", "web_search", "sunny", ""),
}

func TestStreamingUsageInFinalChunkWithoutChoices(t *testing.T) {
	f := &providertest.Server{Path: apiPath, Handler: func(w http.ResponseWriter, _ map[string]any) {
		sse(w,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024","choices":[{"index":0,"delta":{"role":"assistant","content":"Sunny "}}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024","choices":[{"index":0,"delta":{"content":"in Paris."},"finish_reason":"stop"}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":8,"total_tokens":128,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":3}}}`)
	}}
	_, m := start(t, f, nil)
	var deltas []string
	resp, err := m.Generate(context.Background(), &model.Request{Messages: conversation, OnDelta: func(d model.Delta) { deltas = append(deltas, d.Content) }})
	require.NoError(t, err)
	assert.Equal(t, []string{"Sunny ", "in Paris."}, deltas)
	assert.Equal(t, "Sunny in Paris.", resp.Message.Content)
	assert.Equal(t, "chatcmpl-1", resp.ID)
	assert.Equal(t, "gpt-4o-mini-2024", resp.Model)
	assert.Equal(t, []string{"stop"}, resp.FinishReasons)
	assert.Equal(t, &message.UsageMetadata{InputTokens: 120, OutputTokens: 8, TotalTokens: 128,
		InputTokenDetails: &message.InputTokenDetails{CacheRead: 64}, OutputTokenDetails: &message.OutputTokenDetails{Reasoning: 3}},
		resp.Message.UsageMetadata)
	assert.Equal(t, "gpt-4o-mini-2024", resp.Message.ModelName())

	body := f.Requests()[0].Body
	assert.Equal(t, true, body["stream"])
	assert.Equal(t, map[string]any{"include_usage": true}, body["stream_options"], "include_usage on by default for a custom base_url")
	assert.Equal(t, "Bearer sk-test-secret", f.Requests()[0].Auth)
	msgs := body["messages"].([]any)
	require.Len(t, msgs, 4)
	assert.Equal(t, "system", msgs[0].(map[string]any)["role"])
	asst := msgs[2].(map[string]any)
	assert.Equal(t, "assistant", asst["role"])
	tc := asst["tool_calls"].([]any)[0].(map[string]any)
	assert.Equal(t, "call_1", tc["id"])
	assert.JSONEq(t, `{"query":"paris"}`, tc["function"].(map[string]any)["arguments"].(string))
	assert.Equal(t, map[string]any{"role": "tool", "content": "sunny", "tool_call_id": "call_1"}, msgs[3])
}

func TestStreamingUsageInLastChunkWithChoicesAndToolCalls(t *testing.T) {
	f := &providertest.Server{Path: apiPath, Handler: func(w http.ResponseWriter, _ map[string]any) {
		sse(w,
			`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"think "}}]}`,
			`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"task","arguments":"{\"prompt\":"}},{"index":1,"id":"call_b","type":"function","function":{"name":"bash","arguments":""}}]}}]}`,
			`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"x\"}"}},{"index":1,"function":{"arguments":"{\"command\":\"ls\"}"}}]}}]}`,
			`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":106,"completion_tokens":112,"total_tokens":218,"prompt_tokens_details":{"cached_tokens":64}}}`)
	}}
	_, m := start(t, f, nil)
	resp, err := m.Generate(context.Background(), &model.Request{Messages: conversation[:2],
		Tools: []model.ToolSpec{{Name: "task", Description: "d", Parameters: map[string]any{"type": "object"}}}, ToolChoice: "auto"})
	require.NoError(t, err)
	assert.Equal(t, []message.ToolCall{
		{ID: "call_a", Name: "task", Args: map[string]any{"prompt": "x"}},
		{ID: "call_b", Name: "bash", Args: map[string]any{"command": "ls"}},
	}, resp.Message.ToolCalls)
	assert.Equal(t, "think ", resp.Message.AdditionalKwargs["reasoning_content"])
	require.NotNil(t, resp.Message.UsageMetadata, "usage read from a final chunk that also has choices")
	assert.Equal(t, int64(218), resp.Message.UsageMetadata.TotalTokens)
	assert.Equal(t, int64(64), resp.Message.UsageMetadata.CacheRead())
	assert.Equal(t, []string{"call_a", "call_b"}, resp.Message.ToolCallIDs())
	body := f.Requests()[0].Body
	assert.Equal(t, "auto", body["tool_choice"])
	tool := body["tools"].([]any)[0].(map[string]any)
	assert.Equal(t, "function", tool["type"])
	assert.Equal(t, "task", tool["function"].(map[string]any)["name"])
}

func TestStreamUsageFalseIsKept(t *testing.T) {
	f := &providertest.Server{Path: apiPath, Handler: func(w http.ResponseWriter, _ map[string]any) {
		sse(w, `{"id":"c3","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`)
	}}
	off := false
	_, m := start(t, f, func(c *config.Model) { c.StreamUsage = &off })
	resp, err := m.Generate(context.Background(), &model.Request{Messages: conversation[:2]})
	require.NoError(t, err)
	assert.NotContains(t, f.Requests()[0].Body, "stream_options", "explicit stream_usage: false is not overridden")
	assert.Nil(t, resp.Message.UsageMetadata, "no usage reported means none")
}

func TestNonStreaming(t *testing.T) {
	f := &providertest.Server{Path: apiPath, Handler: func(w http.ResponseWriter, _ map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"cc-9","object":"chat.completion","created":1,"model":"gpt-4o-mini-2024","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_z","type":"function","function":{"name":"write_todos","arguments":"{\"todos\":[]}"}},{"id":"call_bad","type":"function","function":{"name":"bash","arguments":"{not json"}}]}}],"usage":{"prompt_tokens":50,"completion_tokens":10,"total_tokens":60,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":20}}}`)
	}}
	off := false
	temp := 0.2
	_, m := start(t, f, func(c *config.Model) { c.Stream = &off; c.MaxTokens = 256; c.Temperature = &temp })
	resp, err := m.Generate(context.Background(), &model.Request{Messages: conversation[:2]})
	require.NoError(t, err)
	assert.Equal(t, "cc-9", resp.ID)
	assert.Equal(t, []string{"tool_calls"}, resp.FinishReasons)
	require.Len(t, resp.Message.ToolCalls, 2)
	assert.Equal(t, map[string]any{"todos": []any{}}, resp.Message.ToolCalls[0].Args)
	assert.Empty(t, resp.Message.ToolCalls[1].Args, "invalid JSON arguments are not guessed")
	assert.Len(t, resp.Message.AdditionalKwargs["invalid_tool_calls"], 1)
	assert.Equal(t, int64(20), resp.Message.UsageMetadata.InputTokenDetails.CacheCreation)
	body := f.Requests()[0].Body
	assert.NotContains(t, body, "stream")
	assert.NotContains(t, body, "stream_options")
	assert.Equal(t, 256.0, body["max_tokens"])
	assert.Equal(t, 0.2, body["temperature"])
}

func TestErrorsSurfaceWithoutRetries(t *testing.T) {
	for _, code := range []int{429, 500, 503, 400} {
		f := &providertest.Server{Path: apiPath, Handler: func(w http.ResponseWriter, _ map[string]any) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error":{"message":"failure %d","type":"server_error","code":null,"param":null}}`, code)
		}}
		_, m := start(t, f, nil)
		for _, stream := range []bool{true, false} {
			_, err := m.Generate(context.Background(), &model.Request{Messages: conversation[:2], Stream: &stream})
			var se *model.StatusError
			require.True(t, errors.As(err, &se), "%d stream=%v: %v", code, stream, err)
			assert.Equal(t, code, se.StatusCode)
			assert.Equal(t, fmt.Sprintf("failure %d", code), se.Message)
			assert.Equal(t, code == 429 || code >= 500, model.IsRetryable(err))
			assert.NotContains(t, err.Error(), "sk-test-secret", "the key never appears in errors")
		}
		assert.Len(t, f.Requests(), 2, "no SDK retries")
	}
}

func TestConfigErrors(t *testing.T) {
	_, err := New(config.Model{Name: "m", Provider: ProviderName, Model: "x", APIKeyEnv: "AGENTMETER_UNSET_KEY_VAR"})
	assert.EqualError(t, err, "api_key_env: environment variable AGENTMETER_UNSET_KEY_VAR is not set")
	t.Setenv("OPENAI_API_KEY", "")
	_, err = New(config.Model{Name: "m", Provider: ProviderName, Model: "x"})
	assert.ErrorContains(t, err, "OPENAI_API_KEY is not set")
	_, err = New(config.Model{Name: "m", Provider: ProviderName, Model: "x", BaseURL: "http://127.0.0.1:1/v1"})
	assert.NoError(t, err, "keyless local endpoint")
	_, err = New(config.Model{Name: "m", Provider: ProviderName})
	assert.EqualError(t, err, "model is required")
	_, err = model.New(config.Model{Name: "m", Provider: ProviderName, Model: "x", APIKeyEnv: "AGENTMETER_UNSET_KEY_VAR"})
	assert.EqualError(t, err, `model "m": api_key_env: environment variable AGENTMETER_UNSET_KEY_VAR is not set`)
	assert.True(t, strings.Contains(strings.Join(model.Providers(), ","), ProviderName))
}

// DeepSeek's raw usage (DeerFlow's test_deepseek_raw_usage_normalizes_to_cache_read): 106
// prompt (64 cache hits, 42 misses), 112 completion → cache_read 64, input − cache_read =
// 42.
func TestDeepSeekPromptCacheHitTokens(t *testing.T) {
	f := &providertest.Server{Path: apiPath, Handler: func(w http.ResponseWriter, _ map[string]any) {
		sse(w,
			`{"id":"ds-1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`,
			`{"id":"ds-1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","choices":[],"usage":{"prompt_tokens":106,"completion_tokens":112,"total_tokens":218,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":42}}`)
	}}
	_, m := start(t, f, nil)
	resp, err := m.Generate(context.Background(), &model.Request{Messages: conversation})
	require.NoError(t, err)
	u := resp.Message.UsageMetadata
	require.NotNil(t, u)
	assert.Equal(t, int64(106), u.InputTokens)
	assert.Equal(t, int64(112), u.OutputTokens)
	assert.Equal(t, int64(218), u.TotalTokens)
	assert.Equal(t, int64(64), u.CacheRead())
	assert.Equal(t, int64(42), u.InputTokens-u.CacheRead())
}

// The timeout is per chunk: a stream slower in total than the timeout but with every
// chunk in time succeeds; a stream that stalls fails with ErrStreamChunkTimeout.
func TestStreamChunkTimeoutIsPerChunk(t *testing.T) {
	chunk := func(w http.ResponseWriter, s string) {
		fmt.Fprintf(w, "data: %s\n\n", s)
		w.(http.Flusher).Flush()
	}
	f := &providertest.Server{Path: apiPath, Handler: func(w http.ResponseWriter, body map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		stall := strings.Contains(fmt.Sprint(body["messages"]), "stall")
		for i := range 5 {
			if stall && i == 2 {
				time.Sleep(2 * time.Second)
			}
			time.Sleep(120 * time.Millisecond)
			chunk(w, fmt.Sprintf(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"w%d "}}]}`, i))
		}
		chunk(w, `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
		fmt.Fprint(w, "data: [DONE]\n\n")
	}}
	_, m := start(t, f, func(c *config.Model) { c.Timeout = 400 * time.Millisecond })
	start := time.Now()
	resp, err := m.Generate(context.Background(), &model.Request{Messages: []message.Message{message.Human("keep going")}})
	require.NoError(t, err, "each chunk came within the timeout")
	assert.Greater(t, time.Since(start), 400*time.Millisecond, "the whole stream took longer than one timeout")
	assert.Equal(t, "w0 w1 w2 w3 w4 ", resp.Message.Content)
	_, err = m.Generate(context.Background(), &model.Request{Messages: []message.Message{message.Human("stall")}})
	require.Error(t, err)
	assert.ErrorIs(t, err, model.ErrStreamChunkTimeout)
}
