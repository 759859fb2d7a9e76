package langfuse

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/exporter/internal/vendortest"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

// A push of revision 1 whose request takes longer than a newer push of the same span
// may wait (vendorhttp.MaxReemissionWait): the newer push does not go out over it, it
// fails retryably and its retry goes after, so Langfuse keeps revision 2.
func TestSlowOlderPushIsNotOvertaken(t *testing.T) {
	srv := langfusefake.New(t)
	cfg := testConfig(srv)
	cfg.Endpoint = vendortest.SlowFirstPost(t, srv.URL, vendorhttp.MaxReemissionWait+time.Second)
	exp, _ := started(t, cfg)
	ctx := context.Background()
	td, _, ids := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	chat := ids[langfusefake.RoleLeadChat1]
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		assert.NoError(t, exp.ConsumeTraces(ctx, fakevendor.Reemission(td, chat, 1, genai.Usage{Input: 1111})))
	}()
	time.Sleep(200 * time.Millisecond)
	go func() {
		defer wg.Done()
		assert.NoError(t, exp.ConsumeTraces(ctx, fakevendor.Reemission(td, chat, 2, genai.Usage{Input: 2222})))
	}()
	wg.Wait()
	got := langfusefake.ByID(srv.Rows())[chat.String()]
	assert.EqualValues(t, 2222, got.Metadata["subagent_input_tokens"], "revision 2 is the newest")
}
