// Package agentusage is the agentusage traces receiver: one HTTP server that takes
// agent usage from applications that do not emit agentmeter spans, with three faces —
// native usage records (POST /v1/usage), a LangSmith-compatible API and a
// Langfuse-compatible API — and turns every input into the spans of the wire contract
// (docs/contract.md#spans), so the rest of the pipeline cannot tell sources apart.
// docs/agentusage.md describes the mapping of each face.
package agentusage

//go:generate go tool -modfile=../../internal/tools/go.mod mdatagen metadata.yaml
