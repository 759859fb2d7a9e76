// Package pricing holds agentmeter's price table: USD per million tokens per model,
// matched by provider and model id, with cache-read and cache-write (5-minute and 1-hour)
// rates, a reasoning rate, prompt-size tiers, the date each price took effect and
// time-of-day prices. It prices one model call's usage into a genai.Cost.
//
// The default table is pydantic's genai-prices dataset (genai-prices.json, an embedded
// snapshot that `make prices` regenerates) with agentmeter's overrides (overrides.yaml);
// models are found by the dataset's own match rules. A Refresher swaps in a newer dataset
// at runtime. A config adds or overrides rows and may load a LiteLLM
// model_prices_and_context_window.json or a genai-prices data.json.
package pricing

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Row is one price of one model from one date on, as written in a price file or config.
// Rates are USD per million tokens; a nil rate takes its default (see Resolve).
type Row struct {
	// Provider is the provider family (openai, anthropic, google, deepseek, mistral, or any
	// gen_ai.provider.name value for a reseller's own price).
	Provider string `yaml:"provider" mapstructure:"provider" json:"provider"`
	// Model is the canonical model id; it always matches itself.
	Model string `yaml:"model" mapstructure:"model" json:"model"`
	// Match lists further ids this price applies to: exact ids, or patterns with '*'
	// (any run of characters). Dated ids ("-20250514", "-2024-08-06", "@20250514") and a
	// "-latest" suffix are matched without listing them.
	Match []string `yaml:"match,omitempty" mapstructure:"match" json:"match,omitempty"`
	// Effective is the first day (UTC, YYYY-MM-DD) this price applies; empty means always.
	Effective string `yaml:"effective,omitempty" mapstructure:"effective" json:"effective,omitempty"`
	// Source says where the price comes from (a pricing page, a file).
	Source string `yaml:"source,omitempty" mapstructure:"source" json:"source,omitempty"`

	Rates `yaml:",inline" mapstructure:",squash"`

	// Tiers are higher prices for large prompts: a tier applies to the whole call when its
	// prompt (input tokens, cache included) is above AboveInputTokens.
	Tiers []Tier `yaml:"tiers,omitempty" mapstructure:"tiers" json:"tiers,omitempty"`

	// TimeOfDay limits the row to calls started in a daily window (peak and off-peak
	// prices); such rows are consulted before the dated ones, as the dataset does.
	TimeOfDay *TimeOfDay `yaml:"time_of_day,omitempty" mapstructure:"time_of_day" json:"time_of_day,omitempty"`

	// Reason says why an override row replaces the dataset's price (overrides.yaml).
	Reason string `yaml:"reason,omitempty" mapstructure:"reason" json:"reason,omitempty"`

	expr  *matchExpr // the dataset's match expression; nil for agentmeter's own rows
	order int        // the model's position in its dataset provider (1-based); 0 for own rows
}

// TimeOfDay is a daily window, "HH:MM:SS" with Z or an offset ("00:30:00Z"); End before
// Start wraps past midnight.
type TimeOfDay struct {
	Start string `yaml:"start" mapstructure:"start" json:"start"`
	End   string `yaml:"end" mapstructure:"end" json:"end"`
}

// Rates are USD per million tokens of each kind. nil means "not given".
type Rates struct {
	Input        *float64 `yaml:"input,omitempty" mapstructure:"input" json:"input,omitempty"`
	Output       *float64 `yaml:"output,omitempty" mapstructure:"output" json:"output,omitempty"`
	CacheRead    *float64 `yaml:"cache_read,omitempty" mapstructure:"cache_read" json:"cache_read,omitempty"`
	CacheWrite   *float64 `yaml:"cache_write,omitempty" mapstructure:"cache_write" json:"cache_write,omitempty"`
	CacheWrite1h *float64 `yaml:"cache_write_1h,omitempty" mapstructure:"cache_write_1h" json:"cache_write_1h,omitempty"`
	Reasoning    *float64 `yaml:"reasoning,omitempty" mapstructure:"reasoning" json:"reasoning,omitempty"`
}

// Tier is a prompt-size price tier.
type Tier struct {
	AboveInputTokens int64 `yaml:"above_input_tokens" mapstructure:"above_input_tokens" json:"above_input_tokens"`
	Rates            `yaml:",inline" mapstructure:",squash"`
}

// Price is a resolved rate set: every kind has a rate (USD per million tokens).
type Price struct {
	Input, Output, CacheRead, CacheWrite, CacheWrite1h, Reasoning float64
}

// ResolvedRow is a validated row with its defaults filled in.
type ResolvedRow struct {
	Provider, Model, Source string
	// ID names the row in agentmeter.cost.price: "<provider>/<model>@<effective>".
	ID        string
	Effective time.Time // zero: always
	Base      Price
	Tiers     []ResolvedTier // ascending by AboveInputTokens
	patterns  []string
	expr      *matchExpr
	order     int
	// window is the time-of-day window in seconds of the UTC day; nil: all day.
	window *[2]int
}

// ResolvedTier is a tier with every rate filled in.
type ResolvedTier struct {
	AboveInputTokens int64
	Price            Price
}

// PriceFor returns the rates that apply to a call with this many prompt tokens: the
// highest tier the prompt is above, else the base price.
func (r *ResolvedRow) PriceFor(inputTokens int64) Price {
	p := r.Base
	for _, t := range r.Tiers {
		if inputTokens > t.AboveInputTokens {
			p = t.Price
		}
	}
	return p
}

// Resolve validates the row and fills in defaults: cache read and cache write cost the
// input rate when not given (the provider gives no discount), a 1-hour write costs the
// 5-minute write rate when not given (the provider has one write rate), reasoning costs
// the output rate. A tier's missing rate takes the row's rate when the row set it, else
// the same default inside the tier. Errors name the field; path prefixes them ("prices[3]").
func (r Row) Resolve(path string) (ResolvedRow, error) {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(path+"."+format, a...)) }
	if r.Provider == "" {
		fail("provider must be set")
	}
	if r.Model == "" {
		fail("model must be set")
	}
	if r.Input == nil {
		fail("input must be set (USD per million input tokens)")
	}
	if r.Output == nil {
		fail("output must be set (USD per million output tokens)")
	}
	checkRates(r.Rates, fail, "")
	out := ResolvedRow{Provider: r.Provider, Model: r.Model, Source: r.Source}
	if r.Effective != "" {
		t, err := time.Parse(time.DateOnly, r.Effective)
		if err != nil {
			fail("effective must be a date YYYY-MM-DD, got %q", r.Effective)
		}
		out.Effective = t
	}
	for i, m := range r.Match {
		if m == "" {
			fail("match[%d] must not be empty", i)
		}
	}
	if r.TimeOfDay != nil {
		start, err1 := secondsOfDay(r.TimeOfDay.Start)
		end, err2 := secondsOfDay(r.TimeOfDay.End)
		if err1 != nil {
			fail("time_of_day.start: %v", err1)
		}
		if err2 != nil {
			fail("time_of_day.end: %v", err2)
		}
		out.window = &[2]int{start, end}
	}
	if len(errs) > 0 {
		return ResolvedRow{}, errors.Join(errs...)
	}
	out.Base = resolveBase(r.Rates)
	var prev int64 = -1
	for i, t := range r.Tiers {
		if t.AboveInputTokens < 0 {
			fail("tiers[%d].above_input_tokens must not be negative, got %d", i, t.AboveInputTokens)
		} else if t.AboveInputTokens <= prev {
			fail("tiers[%d].above_input_tokens must be above the previous tier's (%d), got %d", i, prev, t.AboveInputTokens)
		}
		prev = t.AboveInputTokens
		checkRates(t.Rates, fail, fmt.Sprintf("tiers[%d].", i))
		out.Tiers = append(out.Tiers, ResolvedTier{AboveInputTokens: t.AboveInputTokens, Price: resolveTier(out.Base, r.Rates, t.Rates)})
	}
	if len(errs) > 0 {
		return ResolvedRow{}, errors.Join(errs...)
	}
	out.ID = r.Provider + "/" + r.Model
	if r.Effective != "" {
		out.ID += "@" + r.Effective
	}
	if r.TimeOfDay != nil {
		out.ID += "~" + r.TimeOfDay.Start + "-" + r.TimeOfDay.End
	}
	out.expr, out.order = r.expr, r.order
	if r.expr == nil { // a dataset row is found by its match expression alone
		out.patterns = append([]string{r.Model}, r.Match...)
	} else {
		out.patterns = r.Match
	}
	return out, nil
}

// secondsOfDay reads "HH:MM[:SS][.frac](Z|±HH:MM)" as seconds of the UTC day; no zone is UTC.
func secondsOfDay(s string) (int, error) {
	m := timeOfDayRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("must be HH:MM:SS with an optional Z or offset, got %q", s)
	}
	h, _ := strconv.Atoi(m[1])
	mi, _ := strconv.Atoi(m[2])
	sec, _ := strconv.Atoi(m[3])
	if h > 23 || mi > 59 || sec > 59 {
		return 0, fmt.Errorf("must be a time of day, got %q", s)
	}
	v := h*3600 + mi*60 + sec
	if z := m[4]; z != "" && z != "Z" {
		oh, _ := strconv.Atoi(z[1:3])
		om, _ := strconv.Atoi(z[4:6])
		off := (oh*60 + om) * 60
		if z[0] == '+' {
			v -= off
		} else {
			v += off
		}
	}
	return ((v % 86400) + 86400) % 86400, nil
}

var timeOfDayRe = regexp.MustCompile(`^(\d{2}):(\d{2})(?::(\d{2}))?(?:\.\d+)?(Z|[+-]\d{2}:\d{2})?$`)

// inWindow reports whether at falls in the row's daily window (End before Start wraps).
func (r *ResolvedRow) inWindow(at time.Time) bool {
	u := at.UTC()
	s := u.Hour()*3600 + u.Minute()*60 + u.Second()
	start, end := r.window[0], r.window[1]
	if end < start {
		return s >= start || s < end
	}
	return s >= start && s < end
}

func checkRates(r Rates, fail func(string, ...any), prefix string) {
	for _, f := range [...]struct {
		name string
		v    *float64
	}{{"input", r.Input}, {"output", r.Output}, {"cache_read", r.CacheRead}, {"cache_write", r.CacheWrite}, {"cache_write_1h", r.CacheWrite1h}, {"reasoning", r.Reasoning}} {
		if f.v != nil && !(*f.v >= 0 && *f.v < 1e6) { // also false for NaN
			fail("%s%s must be a price between 0 and 1e6 USD per million tokens, got %v", prefix, f.name, *f.v)
		}
	}
}

func resolveBase(r Rates) Price {
	p := Price{Input: *r.Input, Output: *r.Output}
	p.CacheRead = or(r.CacheRead, p.Input)
	p.CacheWrite = or(r.CacheWrite, p.Input)
	p.CacheWrite1h = or(r.CacheWrite1h, p.CacheWrite)
	p.Reasoning = or(r.Reasoning, p.Output)
	return p
}

// resolveTier fills a tier's missing rates: a rate the row set explicitly carries over
// from the base; a rate the row left to its default follows the same default inside the
// tier (cache rates follow the tier's input, reasoning its output).
func resolveTier(base Price, row, r Rates) Price {
	p := Price{Input: or(r.Input, base.Input), Output: or(r.Output, base.Output)}
	p.CacheRead = or(r.CacheRead, pick(row.CacheRead != nil, base.CacheRead, p.Input))
	p.CacheWrite = or(r.CacheWrite, pick(row.CacheWrite != nil, base.CacheWrite, p.Input))
	p.CacheWrite1h = or(r.CacheWrite1h, pick(row.CacheWrite1h != nil, base.CacheWrite1h, p.CacheWrite))
	p.Reasoning = or(r.Reasoning, pick(row.Reasoning != nil, base.Reasoning, p.Output))
	return p
}

func pick(cond bool, a, b float64) float64 {
	if cond {
		return a
	}
	return b
}

func or(v *float64, def float64) float64 {
	if v != nil {
		return *v
	}
	return def
}

// F is a convenience for building Rates in code and tests.
func F(v float64) *float64 { return &v }
