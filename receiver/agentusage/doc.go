// Package agentusage is the agentusage traces receiver: one HTTP server that takes
// agent usage from applications that do not emit agentmeter spans and turns every input
// into the spans of the wire contract (docs/contract.md#spans), so the rest of the
// pipeline cannot tell sources apart.
//
// A face is one API the server speaks, with its endpoints, its body format and
// its answers: native usage records (POST /v1/usage), the LangSmith API (runs), and
// the Langfuse API in its two forms (OTLP spans, and the legacy ingestion batch). An
// application keeps its vendor SDK and only points it at the receiver; each face
// decodes into the one record form (internal/record), and one builder writes the spans
// (internal/build). docs/agentusage.md describes the mapping of each face.
package agentusage

//go:generate go tool -modfile=../../internal/tools/go.mod mdatagen metadata.yaml
