// Package subagentmerge is a traces processor that buffers spans by trace id and, once a
// trace is complete (or idle, or pushed out by capacity, or at shutdown), adds the token
// usage of every subagent run onto the chat span whose response dispatched it
// (docs/contract.md#merge: DeerFlow's merge onto the dispatching AIMessage).
//
// The buffer keeps incoming spans as OTLP protobuf bytes per trace plus a small index
// (span id, parent id) for completeness and duplicate checks, in a sharded map with one
// sweeper goroutine for idle release; see docs/subagentmerge.md.
package subagentmerge // import "github.com/agentmeter/agentmeter/processor/subagentmerge"

//go:generate go tool -modfile=../../internal/tools/go.mod mdatagen metadata.yaml
