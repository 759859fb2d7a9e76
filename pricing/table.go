package pricing

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Layer is one source of rows: the default table, a loaded file, the config's own rows.
// Name prefixes validation errors ("prices[2].input ...").
type Layer struct {
	Name string
	Rows []Row
}

// Table finds the price of a model call. It is safe for concurrent use.
type Table struct {
	families map[string]*index // provider family → its models
	all      *index            // every model, for providers the table does not know
	rows     int

	memoMu   sync.RWMutex
	memo     map[string]map[string]*history // provider → model → history (nil: unknown)
	memoSize int
}

// memoLimit bounds the lookup memo, so a stream of made-up model ids cannot grow it
// without end; lookups past it are still answered, only not remembered.
const memoLimit = 10_000

// history is one model's prices over time (one provider, one canonical id), ascending by
// effective date.
type history struct {
	provider, model string
	rows            []*ResolvedRow
	patternLen      int
}

type index struct {
	exact map[string]*history
	globs []glob // most specific first
}

type glob struct {
	parts []string // the pattern split at '*'
	h     *history
	lits  int
}

// New builds a table from layers, later layers winning: a layer that has rows for a
// (provider, model) replaces every row of that model from the layers before it, so an
// override is never mixed with the dates of the price it replaces. Every invalid row is
// reported, naming its layer, index and field.
func New(layers ...Layer) (*Table, error) {
	type key struct{ provider, model string }
	merged := map[key]*history{}
	var order []key
	var errs []error
	for _, l := range layers {
		seen := map[key]*history{}
		dates := map[string]bool{}
		for i, r := range l.Rows {
			path := fmt.Sprintf("%s[%d]", l.Name, i)
			rr, err := r.Resolve(path)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			rr.Provider, rr.Model = Family(rr.Provider), strings.ToLower(rr.Model)
			for j := range rr.patterns {
				rr.patterns[j] = strings.ToLower(rr.patterns[j])
			}
			k := key{rr.Provider, rr.Model}
			dk := k.provider + "\x00" + k.model + "\x00" + r.Effective
			if dates[dk] {
				errs = append(errs, fmt.Errorf("%s: a second row for %s/%s effective %q in the same %s", path, rr.Provider, rr.Model, r.Effective, l.Name))
				continue
			}
			dates[dk] = true
			h := seen[k]
			if h == nil {
				h = &history{provider: k.provider, model: k.model}
				seen[k] = h
				if merged[k] == nil {
					order = append(order, k)
				}
				merged[k] = h
			}
			h.rows = append(h.rows, &rr)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t := &Table{families: map[string]*index{}, all: &index{exact: map[string]*history{}}, memo: map[string]map[string]*history{}}
	for _, k := range order {
		h := merged[k]
		sort.SliceStable(h.rows, func(i, j int) bool { return h.rows[i].Effective.Before(h.rows[j].Effective) })
		t.rows += len(h.rows)
		fam := t.families[h.provider]
		if fam == nil {
			fam = &index{exact: map[string]*history{}}
			t.families[h.provider] = fam
		}
		// Every row's patterns count: a model renamed between dates keeps its old ids.
		for _, r := range h.rows {
			for _, p := range r.patterns {
				fam.add(p, h)
				t.all.add(p, h)
			}
		}
	}
	for _, ix := range append([]*index{t.all}, values(t.families)...) {
		sort.SliceStable(ix.globs, func(i, j int) bool { return ix.globs[i].lits > ix.globs[j].lits })
	}
	return t, nil
}

func values(m map[string]*index) []*index {
	out := make([]*index, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func (ix *index) add(pattern string, h *history) {
	if !strings.Contains(pattern, "*") {
		if _, taken := ix.exact[pattern]; !taken { // first listed wins (defaults: provider's own row)
			ix.exact[pattern] = h
		}
		return
	}
	parts := strings.Split(pattern, "*")
	ix.globs = append(ix.globs, glob{parts: parts, h: h, lits: len(pattern) - (len(parts) - 1)})
}

func (ix *index) find(id string) *history {
	if h, ok := ix.exact[id]; ok {
		return h
	}
	for _, g := range ix.globs {
		if globMatch(g.parts, id) {
			return g.h
		}
	}
	return nil
}

// globMatch reports whether s matches the pattern split at its '*'s.
func globMatch(parts []string, s string) bool {
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := len(parts) - 1
	for _, p := range parts[1:last] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, parts[last])
}

// Rows is the number of price rows in the table.
func (t *Table) Rows() int { return t.rows }

// Lookup finds the row pricing a call to model from provider (a gen_ai.provider.name
// value) made at time at: the model's price whose effective date is the latest on or
// before at's UTC day. A call dated before a model's first price gets that first price
// (the model did not exist earlier; the span's clock is off). ok is false for a model the
// table does not know.
//
// The provider narrows the search to its family; a provider the table has no rows for
// (a reseller such as OpenRouter or Bedrock, or none at all) is matched on the model id
// alone, since a model id names the same model wherever it is served — a reseller with
// its own prices gets config rows under its provider name, which are then found first.
func (t *Table) Lookup(provider, model string, at time.Time) (*ResolvedRow, bool) {
	h := t.history(provider, model)
	if h == nil {
		return nil, false
	}
	day := at.UTC()
	i := sort.Search(len(h.rows), func(i int) bool { return h.rows[i].Effective.After(day) })
	if i == 0 {
		return h.rows[0], true
	}
	return h.rows[i-1], true
}

// history memoises resolve: spans repeat a handful of (provider, model) pairs, and a
// two-level map of strings looks them up without allocating.
func (t *Table) history(provider, model string) *history {
	t.memoMu.RLock()
	h, ok := t.memo[provider][model]
	t.memoMu.RUnlock()
	if ok {
		return h
	}
	h = t.resolve(provider, model)
	t.memoMu.Lock()
	if t.memoSize < memoLimit {
		byModel := t.memo[provider]
		if byModel == nil {
			byModel = map[string]*history{}
			t.memo[provider] = byModel
		}
		if _, ok := byModel[model]; !ok {
			byModel[model] = h
			t.memoSize++
		}
	}
	t.memoMu.Unlock()
	return h
}

var (
	bedrockID = regexp.MustCompile(`^(?:[a-z]{2,4}\.)?(anthropic|meta|mistral|amazon|cohere|deepseek|openai|google)\.(.+?)(?:-v\d+(?::\d+)?)?$`)
	datedID   = regexp.MustCompile(`(?:[-@]\d{8}|-\d{4}-\d{2}-\d{2})$`)
)

func (t *Table) resolve(provider, model string) *history {
	id := strings.ToLower(strings.TrimSpace(model))
	if id == "" {
		return nil
	}
	fam := Family(provider)
	id = strings.TrimPrefix(id, "models/") // Gemini API resource names
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		// "anthropic/claude-sonnet-4" (OpenRouter, LiteLLM): the prefix names the vendor.
		vendor := id[:i]
		if j := strings.LastIndexByte(vendor, '/'); j >= 0 {
			vendor = vendor[j+1:]
		}
		if _, known := t.families[fam]; !known {
			fam = Family(vendor)
		}
		id = id[i+1:]
	}
	if m := bedrockID.FindStringSubmatch(id); m != nil {
		if _, known := t.families[fam]; !known {
			fam = Family(m[1])
		}
		id = m[2]
	}
	cands := []string{id}
	if d := datedID.ReplaceAllString(id, ""); d != id {
		cands = append(cands, d)
	}
	if l := strings.TrimSuffix(cands[len(cands)-1], "-latest"); l != cands[len(cands)-1] {
		cands = append(cands, l)
	}
	if ix := t.families[fam]; ix != nil {
		for _, c := range cands {
			if h := ix.find(c); h != nil {
				return h
			}
		}
	}
	for _, c := range cands {
		if h := t.all.find(c); h != nil {
			return h
		}
	}
	return nil
}

// Family maps a gen_ai.provider.name value (or a vendor prefix) to the provider family
// the default table files prices under; values it does not know are kept, lower-cased.
func Family(provider string) string {
	p := strings.ToLower(strings.TrimSpace(provider))
	switch p {
	case "gcp.gemini", "gcp.vertex_ai", "gcp.gen_ai", "gemini", "vertex_ai", "google", "google-ai", "google_genai", "google-vertex", "vertex":
		return "google"
	case "mistral_ai", "mistralai", "mistral":
		return "mistral"
	case "anthropic", "claude":
		return "anthropic"
	case "openai":
		return "openai"
	case "deepseek":
		return "deepseek"
	}
	return p
}
