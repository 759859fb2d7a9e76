// Package subagentmerge is a traces processor that adds the token usage of every
// subagent run onto the chat span whose response dispatched it (docs/contract.md#merge:
// DeerFlow's merge onto the dispatching AIMessage).
//
// In stream mode (the default) every span goes on in the call that brought it and a
// per-trace ledger (ledger.go) keeps what re-emitting a changed dispatcher needs; in
// hold mode spans are buffered by trace until the trace is complete (hold_ingest.go,
// hold_release.go). Both use one merge (internal/merge) over trimmed copies of a trace's
// spans (skeleton.go); see docs/subagentmerge.md.
package subagentmerge // import "github.com/agentmeter/agentmeter/processor/subagentmerge"

//go:generate go tool -modfile=../../internal/tools/go.mod mdatagen metadata.yaml
