package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/model/internal/providertest"
)

// apiPath is where the provider sends its requests.
const apiPath = "/v1/messages"

func events(w http.ResponseWriter, evs ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range evs {
		var typ struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal([]byte(e), &typ)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ.Type, e)
	}
}

func start(t *testing.T, f *providertest.Server, mutate func(*config.Model)) model.ChatModel {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Setenv("TEST_ANTHROPIC_KEY", "sk-ant-secret")
	cfg := config.Model{Name: "claude", Provider: ProviderName, Model: "claude-sonnet-4-5", BaseURL: srv.URL, APIKeyEnv: "TEST_ANTHROPIC_KEY", SupportsThinking: true}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(cfg)
	require.NoError(t, err)
	return model.Wrap(p, model.InfoFromConfig(cfg))
}

var conversation = []message.Message{
	message.System("be brief"),
	message.Human("facts?"),
	{ID: "a1", Role: message.RoleAI, Content: "checking", ToolCalls: []message.ToolCall{
		{ID: "toolu_1", Name: "bash", Args: map[string]any{"command": "ls"}},
		{ID: "toolu_2", Name: "read_file", Args: map[string]any{"path": "a"}}}},
	message.Tool("toolu_1", "bash", "a.txt", ""),
	message.Tool("toolu_2", "read_file", "Error: missing", message.ToolError),
}

func TestStreamingNormalisesCacheIntoInput(t *testing.T) {
	f := &providertest.Server{Path: apiPath, Handler: func(w http.ResponseWriter, _ map[string]any) {
		events(w,
			`{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"cache_read_input_tokens":1000,"cache_creation_input_tokens":200,"output_tokens":1}}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig=="}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Two "}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"files."}}`,
			`{"type":"content_block_stop","index":1}`,
			`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_9","name":"task","input":{}}}`,
			`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"prompt\":"}}`,
			`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"go\"}"}}`,
			`{"type":"content_block_stop","index":2}`,
			`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42,"output_tokens_details":{"thinking_tokens":12}}}`,
			`{"type":"message_stop"}`)
	}}
	m := start(t, f, nil)
	var text, thinking string
	resp, err := m.Generate(context.Background(), &model.Request{Messages: conversation, Thinking: true,
		Tools:   []model.ToolSpec{{Name: "task", Description: "d", Parameters: map[string]any{"type": "object", "properties": map[string]any{"prompt": map[string]any{"type": "string"}}, "required": []string{"prompt"}}}},
		OnDelta: func(d model.Delta) { text += d.Content; thinking += d.Reasoning }})
	require.NoError(t, err)
	assert.Equal(t, "Two files.", text)
	assert.Equal(t, "hmm", thinking)
	assert.Equal(t, "Two files.", resp.Message.Content)
	assert.Equal(t, []message.ToolCall{{ID: "toolu_9", Name: "task", Args: map[string]any{"prompt": "go"}}}, resp.Message.ToolCalls)
	assert.Equal(t, "sig==", resp.Message.AdditionalKwargs[KwargThinkingSignature])
	assert.Equal(t, "msg_01", resp.ID)
	assert.Equal(t, "claude-sonnet-4-5-20250929", resp.Model)
	assert.Equal(t, []string{"tool_use"}, resp.FinishReasons)
	require.NotNil(t, resp.Message.UsageMetadata)
	assert.Equal(t, genai.Usage{Input: 1220, Output: 42, CacheRead: 1000, CacheCreation: 200, Reasoning: 12}, resp.Message.UsageMetadata.GenAI(),
		"input = input + cache read + cache creation")
	assert.Equal(t, int64(1262), resp.Message.UsageMetadata.TotalTokens)

	body := f.Requests()[0].Body
	assert.Equal(t, "Bearer sk-ant-secret", f.Requests()[0].Auth, "the SDK sends the key as a bearer token")
	assert.Equal(t, true, body["stream"])
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "be brief"}}, body["system"])
	msgs := body["messages"].([]any)
	require.Len(t, msgs, 3, "user, assistant, one user turn with both tool results")
	results := msgs[2].(map[string]any)["content"].([]any)
	require.Len(t, results, 2)
	assert.Equal(t, "toolu_1", results[0].(map[string]any)["tool_use_id"])
	assert.Equal(t, true, results[1].(map[string]any)["is_error"])
	asst := msgs[1].(map[string]any)["content"].([]any)
	assert.Equal(t, "tool_use", asst[1].(map[string]any)["type"])
	assert.Equal(t, map[string]any{"command": "ls"}, asst[1].(map[string]any)["input"])
	assert.Equal(t, map[string]any{"type": "enabled", "budget_tokens": 2048.0}, body["thinking"])
	assert.Equal(t, 4096.0, body["max_tokens"])
	tool := body["tools"].([]any)[0].(map[string]any)
	assert.Equal(t, []any{"prompt"}, tool["input_schema"].(map[string]any)["required"])
}

func TestNonStreamingAndToolChoice(t *testing.T) {
	f := &providertest.Server{Path: apiPath, Handler: func(w http.ResponseWriter, _ map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_02","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":3}}`)
	}}
	off := false
	m := start(t, f, func(c *config.Model) { c.Stream = &off; c.MaxTokens = 512 })
	resp, err := m.Generate(context.Background(), &model.Request{Messages: conversation[:2], ToolChoice: "required"})
	require.NoError(t, err)
	assert.Equal(t, "hello", resp.Message.Content)
	assert.Equal(t, genai.Usage{Input: 10, Output: 3}, resp.Message.UsageMetadata.GenAI())
	assert.Nil(t, resp.Message.UsageMetadata.InputTokenDetails, "no cache, no detail block")
	body := f.Requests()[0].Body
	assert.NotContains(t, body, "stream")
	assert.NotContains(t, body, "thinking", "thinking only when requested")
	assert.Equal(t, 512.0, body["max_tokens"])
	assert.Equal(t, map[string]any{"type": "any"}, body["tool_choice"])
}

func TestErrorsSurfaceWithoutRetries(t *testing.T) {
	for _, code := range []int{429, 500, 529, 400} {
		f := &providertest.Server{Path: apiPath, Handler: func(w http.ResponseWriter, _ map[string]any) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"overloaded_error","message":"failure %d"}}`, code)
		}}
		m := start(t, f, nil)
		for _, stream := range []bool{true, false} {
			_, err := m.Generate(context.Background(), &model.Request{Messages: conversation[:2], Stream: &stream})
			var se *model.StatusError
			require.True(t, errors.As(err, &se), "%d: %v", code, err)
			assert.Equal(t, code, se.StatusCode)
			assert.Equal(t, fmt.Sprintf("failure %d", code), se.Message)
			assert.Equal(t, code != 400, model.IsRetryable(err))
			assert.NotContains(t, err.Error(), "sk-ant-secret")
		}
		assert.Len(t, f.Requests(), 2, "no SDK retries")
	}
}

func TestConfigErrors(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	_, err := New(config.Model{Name: "c", Provider: ProviderName, Model: "claude"})
	assert.EqualError(t, err, "api_key_env: environment variable ANTHROPIC_API_KEY is not set")
	_, err = New(config.Model{Name: "c", Provider: ProviderName})
	assert.EqualError(t, err, "model is required")
}
