// Package genaicost is a stateless traces processor that prices every model call: it
// reads the span's own usage (gen_ai.usage.*), finds the model's price in the price table
// (package pricing: the default table, price files, config rows) for the day of the call,
// and writes the cost in USD on the span (agentmeter.cost.*, docs/contract.md#cost). A
// cost the provider reported itself wins and is kept; a model the table does not know
// gets no cost, is counted and logged once. See docs/cost.md.
package genaicost // import "github.com/agentmeter/agentmeter/processor/genaicost"

//go:generate go tool -modfile=../../internal/tools/go.mod mdatagen metadata.yaml
