package langsmith

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/exporter/internal/vendortest"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
)

// A push whose posts take longer than a newer push of one of its patched runs may wait
// (vendorhttp.MaxReemissionWait) sends its older patch last, after its posts: the newer
// push fails retryably instead of going out first, and its retry goes after, so the run
// ends with revision 2.
func TestSlowOlderPatchIsNotOvertaken(t *testing.T) {
	fake := newFake(t)
	h := mustStart(t, fake, func(c *Config) {
		c.ClientConfig.Endpoint = vendortest.SlowFirstPost(t, fake.URL, vendorhttp.MaxReemissionWait+time.Second)
	})
	ctx := context.Background()
	td, ids := fakevendor.AgentTrace(44, base)
	// one push holds the trace and revision 1 of the dispatcher, another revision 2 alone
	p0 := ptrace.NewTraces()
	td.CopyTo(p0)
	fakevendor.Reemission(td, ids.LeadChat, 1, genai.Usage{Input: 1111}).ResourceSpans().MoveAndAppendTo(p0.ResourceSpans())
	p1 := fakevendor.Reemission(td, ids.LeadChat, 2, genai.Usage{Input: 2222})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); assert.NoError(t, h.exp.ConsumeTraces(ctx, p0)) }()
	time.Sleep(200 * time.Millisecond)
	go func() { defer wg.Done(); assert.NoError(t, h.exp.ConsumeTraces(ctx, p1)) }()
	wg.Wait()
	assert.EqualValues(t, 2222, subagentInput(t, fake.Runs()[dottedorder.SpanUUID(ids.LeadChat)]), "revision 2 is the newest")
	assert.Empty(t, fake.Violations())
}
