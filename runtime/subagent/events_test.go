package subagent

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/tool"
)

type event struct {
	name    string
	payload map[string]any
}

// DeerFlow's test_task_tool_core_logic.py: every event carries task_id = the tool call
// id; running events carry the cumulative usage; terminal events carry the summed usage,
// or null without records.
func TestTaskEventsCarryCumulativeUsage(t *testing.T) {
	tt, _, env, _ := newTask(t, scriptedModel(t, finalTurn), probe{}, Options{})
	var mu sync.Mutex
	var evs []event
	env.Emit = func(name string, p map[string]any) { mu.Lock(); evs = append(evs, event{name, p}); mu.Unlock() }
	_, err := dispatch(context.Background(), tt, env)
	require.NoError(t, err)
	require.Len(t, evs, 4)
	for _, e := range evs {
		assert.Equal(t, "call_task_1", e.payload["task_id"], e.name)
	}
	assert.Equal(t, "probe it", evs[0].payload["description"])
	assert.Equal(t, "sub-model", evs[0].payload["model_name"])
	assert.Equal(t, map[string]any{"input_tokens": int64(100), "output_tokens": int64(20), "total_tokens": int64(120)}, evs[1].payload["usage"])
	assert.Equal(t, int64(1), evs[1].payload["message_index"])
	assert.Equal(t, int64(1), evs[1].payload["total_messages"])
	assert.Equal(t, int64(2), evs[2].payload["message_index"])
	assert.Equal(t, int64(2), evs[2].payload["total_messages"])
	assert.Equal(t, map[string]any{"input_tokens": int64(250), "output_tokens": int64(50), "total_tokens": int64(300)}, evs[2].payload["usage"], "cumulative, visible while running")
	assert.Equal(t, "task_completed", evs[3].name)
	assert.Equal(t, "all done", evs[3].payload["result"])
	assert.Equal(t, map[string]any{"input_tokens": int64(250), "output_tokens": int64(50), "total_tokens": int64(300)}, evs[3].payload["usage"])
}

func TestTerminalEventUsageNullWithoutRecords(t *testing.T) {
	// An unknown subagent type fails before any model call, so there are no records.
	tt, rec, env, _ := newTask(t, scriptedModel(t, finalTurn), probe{}, Options{})
	var last event
	env.Emit = func(name string, p map[string]any) { last = event{name, p} }
	_, err := tt.Call(context.Background(), tool.Call{ID: "c", Env: env, Args: map[string]any{"description": "d", "prompt": "p", "subagent_type": "nope"}})
	require.NoError(t, err)
	assert.Equal(t, "task_failed", last.name)
	assert.Nil(t, last.payload["usage"], "usage is null when there are no records")
	assert.Empty(t, rec.get())
}

// DeerFlow's test_task_tool_usage_recorder.py: no recorder (nil Env, nil Usage — a
// subagent's own tools) is not an error.
func TestNoRecorderShapes(t *testing.T) {
	tt, _, _, _ := newTask(t, scriptedModel(t, finalTurn), probe{}, Options{})
	for _, env := range []*tool.Env{nil, {}, {Usage: nil}} {
		res, err := tt.Call(context.Background(), tool.Call{ID: "c", Env: env, Args: map[string]any{"description": "d", "prompt": "p", "subagent_type": "worker"}})
		require.NoError(t, err)
		assert.Equal(t, StatusCompleted, res.AdditionalKwargs["subagent_status"])
		assert.NotNil(t, res.AdditionalKwargs["subagent_token_usage"], "usage still stamped on the message")
	}
}

// task_started names the model the subagent type runs on, not the executor's default.
func TestTaskStartedNamesTheSubagentsModel(t *testing.T) {
	typeModel := scriptedModel(t, finalTurn)
	def, err := NewExecutor(Options{Model: scriptedModelNamed(t, "default-model"), Tools: []tool.Tool{probe{}},
		Types: []Type{{Name: "worker", Description: "w", Model: typeModel}, {Name: "plain", Description: "p"}}})
	require.NoError(t, err)
	assert.Equal(t, "sub-model", def.ModelName("worker"))
	assert.Equal(t, "default-model", def.ModelName("plain"))
	var evs []event
	env := &tool.Env{ThreadID: "t", RunID: "r", Emit: func(name string, p map[string]any) { evs = append(evs, event{name, p}) }}
	_, err = (&TaskTool{Executor: def}).Call(context.Background(), tool.Call{ID: "call_1", Name: "task", Env: env,
		Args: map[string]any{"description": "d", "prompt": "please probe", "subagent_type": "worker"}})
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	assert.Equal(t, "task_started", evs[0].name)
	assert.Equal(t, "sub-model", evs[0].payload["model_name"])
}
