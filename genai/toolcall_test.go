package genai

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestToolCallIDOf(t *testing.T) {
	dec := func(s string) any {
		var v any
		if s != "" {
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				t.Fatal(err)
			}
		}
		return v
	}
	cases := []struct{ name, out, in, want string }{
		{"langchain ToolMessage", `{"lc":1,"kwargs":{"content":"x","tool_call_id":"call_1"}}`, ``, "call_1"},
		{"anthropic tool_result", `[{"type":"tool_result","tool_use_id":"toolu_1"}]`, ``, "toolu_1"},
		{"responses output", `{"type":"function_call_output","call_id":"fc_1"}`, ``, "fc_1"},
		{"langchain ToolCall input", ``, `{"id":"call_2","name":"task","args":{}}`, "call_2"},
		{"nested tool_call", ``, `{"tool_call":{"id":"call_3","name":"task","args":{}}}`, "call_3"},
		{"openai tool call input", ``, `{"id":"call_4","type":"function","function":{"name":"task"}}`, "call_4"},
		{"openllmetry kwargs", ``, `{"args":[],"kwargs":{"function":{"arguments":"{}","name":"task"},"id":"call_5","type":"function"}}`, "call_5"},
		{"openllmetry args", ``, `{"args":[{"id":"call_6","type":"function","function":{"name":"task"}}],"kwargs":{}}`, "call_6"},
		{"output wins", `{"tool_call_id":"from_out"}`, `{"id":"from_in","name":"t","args":{}}`, "from_out"},
		{"a plain id is no call", ``, `{"id":"user_7","name":"bob"}`, ""},
		{"nothing", `"text"`, `{"args":[],"kwargs":{}}`, ""},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, ToolCallIDOf(dec(c.out), dec(c.in)), c.name)
	}
}

func TestResponseToolCallIDs(t *testing.T) {
	var v any
	if err := json.Unmarshal([]byte(`{"generations":[[{"message":{"kwargs":{"tool_calls":[{"id":"a"},{"id":"b"}],
	 "additional_kwargs":{"tool_calls":[{"id":"a"}]}}}}]],
	 "content":[{"type":"tool_use","id":"toolu_1"},{"type":"function_call","id":"fc","call_id":"call_r"}]}`), &v); err != nil {
		t.Fatal(err)
	}
	assert.Equal(t, []string{"toolu_1", "call_r", "a", "b"}, ResponseToolCallIDs(v))
	assert.Empty(t, ResponseToolCallIDs(nil))
}
