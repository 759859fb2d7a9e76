package pricing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/calcprice"
)

// snapshotModels are the snapshot's models as provider/model, in order, and those with a
// per-request fee (requests_kcount), which agentmeter does not bill (genai.Cost has token
// kinds only): their cost is below calcPrice's by that fee. Derived from the data, so a
// new one is found without a list.
func snapshotModels(t *testing.T) (all []string, requestFee map[string]bool) {
	t.Helper()
	var s struct {
		Providers []struct {
			ID     string `json:"id"`
			Models []struct {
				ID     string          `json:"id"`
				Prices json.RawMessage `json:"prices"`
			} `json:"models"`
		} `json:"providers"`
	}
	require.NoError(t, json.Unmarshal(snapshotData, &s))
	requestFee = map[string]bool{}
	for _, p := range s.Providers {
		for _, m := range p.Models {
			all = append(all, p.ID+"/"+m.ID)
			if bytes.Contains(m.Prices, []byte(`"requests_kcount"`)) {
				requestFee[p.ID+"/"+m.ID] = true
			}
		}
	}
	return all, requestFee
}

// gpCase is one call for calcPrice and what agentmeter made of it.
type gpCase struct {
	calcprice.Call
	key      string // provider/model
	scenario string
	ours     *float64
	row      string
}

// periodTimes are one instant in each of a model's price periods: each dated row's
// period (two days after it starts, at an hour outside every time-of-day window), the
// time before the first date, and inside each time-of-day window.
func periodTimes(rows []Row) []time.Time {
	var windows []*ResolvedRow
	var dates []time.Time
	for _, r := range rows {
		rr, err := r.Resolve("r")
		if err != nil {
			continue
		}
		if rr.window != nil {
			windows = append(windows, &rr)
		} else if !rr.Effective.IsZero() {
			dates = append(dates, rr.Effective)
		}
	}
	outside := func(day time.Time) time.Time {
		for h := range 24 {
			at := day.Add(time.Duration(h)*time.Hour + 15*time.Minute)
			in := false
			for _, w := range windows {
				in = in || w.inWindow(at)
			}
			if !in {
				return at
			}
		}
		return day
	}
	var out []time.Time
	sort.Slice(dates, func(i, j int) bool { return dates[i].Before(dates[j]) })
	if len(dates) == 0 {
		out = append(out, outside(time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)))
	} else {
		out = append(out, outside(dates[0].AddDate(0, 0, -30)))
	}
	for _, d := range dates {
		out = append(out, outside(d.AddDate(0, 0, 2)))
	}
	for _, w := range windows {
		out = append(out, time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC).Add(time.Duration(w.window[0]+60)*time.Second))
	}
	return out
}

// promptSizes are a small prompt and both sides of every tier boundary of the rows.
func promptSizes(rows []Row) []int64 {
	sizes := []int64{12_000}
	for _, r := range rows {
		for _, tr := range r.Tiers {
			sizes = append(sizes, tr.AboveInputTokens, tr.AboveInputTokens+1)
		}
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	out := sizes[:0]
	for i, s := range sizes {
		if i == 0 || s != sizes[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// TestDatasetAgainstCalcPrice is the property test over the whole default table: for every
// model of every provider in the snapshot and every price period it has, usages with cache
// reads, 5-minute and 1-hour cache writes and reasoning, at both sides of every tier
// boundary, cost the same with our table as with @pydantic/genai-prices' calcPrice under
// node. A model whose cost differs must be an override (overrides.yaml, with its reason),
// bill a per-request fee, or be one whose own id calcPrice does not match and which we
// price as the same model from another provider; each is listed in docs/cost.md.
func TestDatasetAgainstCalcPrice(t *testing.T) {
	calcprice.Require(t)
	tab, err := New(DefaultLayers()...)
	require.NoError(t, err)

	byModel := map[string][]Row{}
	var keys []string
	for _, r := range DefaultDataset().Rows {
		k := r.Provider + "/" + r.Model
		if byModel[k] == nil {
			keys = append(keys, k)
		}
		byModel[k] = append(byModel[k], r)
	}
	all, fees := snapshotModels(t)
	var cases []gpCase
	// a model the dataset prices in no token kind (OCR pages, audio hours, searches) has no
	// row: calcPrice gives a token-only call $0, agentmeter leaves it unpriced (counted, never
	// a guessed $0)
	noTokenPrice := map[string]bool{}
	for _, k := range all {
		if byModel[k] == nil {
			noTokenPrice[k] = true
			provider, model, _ := strings.Cut(k, "/")
			cases = append(cases, gpCase{Call: calcprice.Call{Provider: provider, Model: model, Timestamp: "2026-11-20T12:00:00Z",
				Usage: calcprice.Usage{Input: 12_000, CacheRead: 3_000, Output: 800}}, key: k, scenario: "no token price"})
		}
	}
	for _, k := range keys {
		rows := byModel[k]
		for _, at := range periodTimes(rows) {
			for _, p := range promptSizes(rows) {
				u := genai.Usage{Input: p, CacheRead: p * 3 / 10, CacheCreation: p / 10, Output: 3_000, Reasoning: 1_200}
				w1h := p / 25
				c := gpCase{
					Call: calcprice.Call{Provider: rows[0].Provider, Model: rows[0].Model, Timestamp: at.Format(time.RFC3339),
						Usage: calcprice.Usage{Input: u.Input, CacheRead: u.CacheRead, Write: u.CacheCreation, Write1h: w1h, Output: u.Output, Reasoning: u.Reasoning}},
					key: k, scenario: fmt.Sprintf("%s prompt %d", at.Format(time.RFC3339), p),
				}
				if row, ok := tab.Lookup(c.Provider, c.Model, at); ok {
					v := Compute(Split(u, w1h), row).Total
					c.ours, c.row = &v, row.ID
				}
				cases = append(cases, c)
			}
		}
	}
	calls := make([]calcprice.Call, len(cases))
	for i, c := range cases {
		calls[i] = c.Call
	}
	res := calcprice.Price(t, calls)

	overridden := map[string]string{}
	for _, o := range Overrides() {
		overridden[o.Provider+"/"+o.Model] = o.Reason
	}
	docs, err := os.ReadFile("../docs/cost.md")
	require.NoError(t, err)

	differs := map[string]string{}
	elsewhere := map[string]bool{} // calcPrice has no price; ours is the same model's from another provider
	equal, zero, neither := 0, 0, 0
	for i, c := range cases {
		r := res[i]
		var d string
		switch {
		case noTokenPrice[c.key]:
			if c.ours != nil || (r != nil && r.Error == "" && r.Total != 0) {
				d = fmt.Sprintf("a model without token prices: ours %v, calcPrice %+v", c.ours, r)
			} else {
				zero++
				continue
			}
		case r == nil && c.ours == nil: // both leave it unpriced (its id is not its own match)
			neither++
			continue
		case r == nil:
			d = "unknown to calcPrice, ours " + c.row
			elsewhere[c.key] = !strings.HasPrefix(c.row, c.Provider+"/")
		case r.Error != "":
			d = "calcPrice error: " + r.Error
		case c.ours == nil:
			d = "unknown to agentmeter, calcPrice matched " + r.Matched
		case math.Abs(r.Total-*c.ours) > 1e-9*math.Max(1, math.Abs(r.Total)):
			d = fmt.Sprintf("ours %.9f (%s), calcPrice %.9f (%s)", *c.ours, c.row, r.Total, r.Matched)
		}
		if d == "" {
			equal++
		} else if differs[c.key] == "" {
			differs[c.key] = c.scenario + ": " + d
		}
	}
	var unexplained, undocumented []string
	for k, d := range differs {
		if _, ok := overridden[k]; !ok && !fees[k] && !elsewhere[k] {
			unexplained = append(unexplained, k+": "+d)
		}
		if !bytes.Contains(docs, []byte("`"+k+"`")) {
			undocumented = append(undocumented, k)
		}
	}
	sort.Strings(unexplained)
	sort.Strings(undocumented)
	t.Logf("%d models (%d with token prices, %d without: unpriced here, $0 to calcPrice), %d cases: %d priced equal to calcPrice, %d unknown to both (an id its own match misses); %d models differ (listed in docs/cost.md)",
		len(all), len(keys), zero, len(cases), equal, neither, len(differs))
	require.Greater(t, len(all), 1600, "the whole dataset is compared")
	require.Equal(t, len(noTokenPrice), zero)
	if len(unexplained) > 0 {
		t.Errorf("models whose cost differs from calcPrice without being an override or a request fee:\n%s", strings.Join(unexplained, "\n"))
	}
	if len(undocumented) > 0 {
		t.Errorf("differences not listed in docs/cost.md (as `provider/model`): %s", strings.Join(undocumented, ", "))
	}
}
