package anthropic

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/model/internal/providertest"
)

// The 1-hour part of Anthropic's cache writes is kept (LangChain's
// input_token_details.ephemeral_1h_input_tokens), so the cost step prices it at the
// 1-hour rate rather than the 5-minute one.
func TestCacheWrites1hKept(t *testing.T) {
	f := &providertest.Server{Path: apiPath, Handler: func(w http.ResponseWriter, _ map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_03","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,`+
			`"usage":{"input_tokens":10,"cache_creation_input_tokens":3000,"cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":2000},"output_tokens":3}}`)
	}}
	off := false
	m := start(t, f, func(c *config.Model) { c.Stream = &off })
	resp, err := m.Generate(context.Background(), &model.Request{Messages: conversation[:2]})
	require.NoError(t, err)
	um := resp.Message.UsageMetadata
	require.NotNil(t, um)
	assert.Equal(t, int64(3000), um.InputTokenDetails.CacheCreation)
	assert.Equal(t, int64(2000), um.CacheCreation1h())
}
