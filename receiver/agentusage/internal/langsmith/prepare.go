package langsmith

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/genai"
)

// prepared holds what a run's span needs that depends on the run alone (not on the
// translator's stores): its indexed metadata, its span ids and, for llm and tool
// runs, the facts read from outputs/extra. Prepare computes it before the receiver
// takes the translator's lock, so that only the placement (Plan, parent lookups,
// the stores) runs one request at a time. A run that Plan merges with another
// (a parked POST, a PATCH in the same request) drops it and is read afresh, so the
// spans are the same with or without Prepare.
type prepared struct {
	md           view
	runType      string // lower-cased run_type
	spanID       pcommon.SpanID
	parentID     string
	parentSpanID pcommon.SpanID
	toolCallID   string     // tool runs
	chat         *chatFacts // llm and chat_model runs
}

// chatFacts is what chat reads from an llm run.
type chatFacts struct {
	name, model, respModel, provider string
	usage                            genai.Usage
	hasUsage                         bool
	toolCallIDs                      []string
}

// Prepare reads, for every op, what its span needs from the run alone. It is safe
// to call concurrently for different requests (it touches only ops) and optional:
// Build computes the same from runs without it.
func Prepare(ops []Op) {
	arena := make([]idxField, 0, 8*len(ops))
	preps := make([]prepared, len(ops))
	ids := make(spanIDs, len(ops)+1)
	for i := range ops {
		r := &ops[i].Run
		p := &preps[i]
		p.md = indexedMetadata(*r, &arena)
		p.runType = strings.ToLower(r.RunType)
		p.spanID = ids.of(r.ID)
		p.parentID = parentIDOf(*r)
		if p.parentID != "" {
			p.parentSpanID = ids.of(p.parentID)
		}
		switch p.runType {
		case "tool":
			p.toolCallID = toolCallID(*r)
		case "llm", "chat_model":
			c := chatFactsOf(*r, p.md)
			p.chat = &c
		}
		r.prep = p
	}
}

func chatFactsOf(r Run, md view) chatFacts {
	var c chatFacts
	model := md.firstString("ls_model_name")
	if model == "" {
		inv, _ := r.extra().child("invocation_params")
		model = inv.firstString("model", "model_name")
	}
	out := r.outputs()
	respModel := out.findString("model_name")
	if respModel == "" {
		respModel = model
	}
	if model == "" {
		model = respModel
	}
	c.name = genai.SpanName(genai.OpChat, model)
	c.model, c.respModel = model, respModel
	c.provider = md.firstString("ls_provider")
	c.usage, c.hasUsage = usageOf(r, out)
	c.toolCallIDs = out.toolCallIDs()
	return c
}
