package pricing

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
)

// Over random usages on every default row: the parts add up to the total, no part is
// negative, every token is priced exactly once (the buckets add up to input + output
// when usage is consistent), and more tokens of any kind never cost less within a tier.
func TestCostProperties(t *testing.T) {
	var rows []*ResolvedRow
	for i, r := range DefaultRows() {
		rr, err := r.Resolve(fmt.Sprintf("default[%d]", i))
		require.NoError(t, err)
		rows = append(rows, &rr)
	}
	r := rand.New(rand.NewPCG(17, 17))
	for i := range 20000 {
		row := rows[i%len(rows)]
		in := r.Int64N(400_000)
		cr := r.Int64N(in + 1)
		cw := r.Int64N(in - cr + 1)
		out := r.Int64N(50_000)
		re := r.Int64N(out + 1)
		u := genai.Usage{Input: in, Output: out, CacheRead: cr, CacheCreation: cw, Reasoning: re}
		w1h := r.Int64N(cw + 1)
		b := Split(u, w1h)
		require.Equal(t, in+out, b.Input+b.CacheRead+b.CacheWrite5m+b.CacheWrite1h+b.Output+b.Reasoning, "each token in one bucket")
		c := Compute(b, row)
		for _, k := range c.Kinds() {
			require.GreaterOrEqual(t, k.USD, 0.0, k.CostType)
		}
		require.InDelta(t, c.PartsSum(), c.Total, 1e-9)
		p := row.PriceFor(b.Prompt())
		want := (float64(b.Input)*p.Input + float64(b.CacheRead)*p.CacheRead + float64(b.CacheWrite5m)*p.CacheWrite +
			float64(b.CacheWrite1h)*p.CacheWrite1h + float64(b.Output)*p.Output + float64(b.Reasoning)*p.Reasoning) / 1e6
		require.LessOrEqual(t, math.Abs(c.Total-want), 1e-9, "the total is Σ bucket × its rate")
		// one more output token never lowers the cost (same tier: output does not pick it)
		more := Compute(Split(genai.Usage{Input: in, Output: out + 1, CacheRead: cr, CacheCreation: cw, Reasoning: re}, w1h), row)
		require.GreaterOrEqual(t, more.Total, c.Total)
	}
}
