package record

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
)

// CheckLabels names the contract key of the first label-bound field past the bound; a
// value at the bound, and a step's name (a span name, never a label), pass.
func TestCheckLabels(t *testing.T) {
	long := strings.Repeat("x", genai.MaxLabelBytes+1)
	atBound := strings.Repeat("x", genai.MaxLabelBytes)
	for key, rec := range map[string]Record{
		genai.AttrServiceName:   {Service: long},
		genai.AttrCaller:        {Caller: long},
		genai.AttrRequestModel:  {Kind: ModelCall, RequestModel: long},
		genai.AttrResponseModel: {Kind: ModelCall, ResponseModel: long},
		genai.AttrProviderName:  {Kind: ModelCall, Provider: long},
		genai.AttrOperationName: {Kind: ModelCall, Operation: long},
		genai.AttrToolType:      {Kind: ToolCall, ToolType: long},
		genai.AttrToolName:      {Kind: ToolCall, Name: long},
		genai.AttrAgentName:     {Kind: AgentRun, Name: long},
	} {
		err := rec.CheckLabels()
		require.Error(t, err, key)
		assert.Equal(t, key+": is 257 bytes long; a label-bound field holds at most 256", err.Error())
	}
	ok := Record{Kind: ModelCall, Service: atBound, Caller: atBound, RequestModel: atBound, ResponseModel: atBound, Provider: atBound}
	assert.NoError(t, ok.CheckLabels())
	step := Record{Kind: Step, Name: long}
	assert.NoError(t, step.CheckLabels(), "a step's name is only a span's")
}
