package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

// A tool's long result or error in Chinese goes on its span cut to the span's bounds
// (4096 bytes of result, 256 of status) at a character's start: a character cut in two
// would make the exporter refuse the whole batch of spans (telemetry/utf8.go).
func TestToolSpanCutsKeepWholeCharacters(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx := telemetry.WithContentCapture(telemetry.WithTracerProvider(context.Background(), tp), true)

	long := strings.Repeat("中", 2000) // 6000 bytes
	p := &fakeProvider{turns: []message.Message{
		aiTurn("", usage(100, 10), call("c1", "echo", long), call("c2", "boom", "x")),
		aiTurn("done", usage(200, 20)),
	}}
	a, err := New(Config{Model: newModel(p),
		Tools: []tool.Tool{echoTool{name: "echo"}, echoTool{name: "boom", fail: errors.New(long)}}})
	require.NoError(t, err)
	_, err = a.Run(ctx, Input{ThreadID: "t", RunID: "r", Messages: []message.Message{message.Human("go")}})
	require.NoError(t, err)

	byName := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		byName[s.Name] = s
	}
	echo := attrMap(byName["execute_tool echo"].Attributes)[genai.AttrToolCallResult].(string)
	assert.Equal(t, strings.Repeat("中", 4096/3), echo)
	boom := byName["execute_tool boom"]
	assert.True(t, utf8.ValidString(boom.Status.Description))
	const head = "Error: boom: "
	assert.Equal(t, head+strings.Repeat("中", (256-len(head))/3), boom.Status.Description)
}
