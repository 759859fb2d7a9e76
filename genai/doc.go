// Package genai is the wire contract of agentmeter (docs/contract.md) as code: span
// names, attribute keys, caller buckets, token metric names and the Usage value with its
// adapters to pdata (pcommon.Map) and to OTel SDK attributes.
//
// It is the single place that knows attribute names. The runtime (which emits spans),
// the collector components (which read and rewrite them) and the exporters all import it
// and nothing else of each other, so a renamed key changes in one file.
package genai
