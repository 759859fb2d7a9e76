package pricing

import (
	"fmt"
	"testing"
)

// BenchmarkLookupMiss is one lookup the memo has not seen (a new model id): the
// candidates tried against the calling provider's models, its vendor's, then every model
// of the dataset. The cost step memoises each (provider, model), so a span pays this once
// per distinct id.
func BenchmarkLookupMiss(b *testing.B) {
	tab, err := New(DefaultLayers()...)
	if err != nil {
		b.Fatal(err)
	}
	ids := []struct{ provider, model string }{
		{"openai", "gpt-5.5-2026-%d"}, {"anthropic", "claude-opus-4-8-%d"}, {"", "unknown-model-%d"}, {"aws.bedrock", "us.anthropic.claude-sonnet-4-5-%d-v1:0"},
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := ids[i%len(ids)]
		_ = tab.resolve(id.provider, fmt.Sprintf(id.model, i))
		i++
	}
}
