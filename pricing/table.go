package pricing

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Layer is one source of rows: the dataset, the overrides, a loaded file, the config's own
// rows. Name prefixes validation errors ("prices[2].input ..."). Providers, set for a
// genai-prices dataset, route provider names and unnamed providers' model ids to the
// dataset's providers.
type Layer struct {
	Name      string
	Rows      []Row
	Providers []ProviderInfo
}

// Table finds the price of a model call. It is safe for concurrent use.
type Table struct {
	families  map[string]*index // provider family → its models
	all       *index            // every model, for providers the table does not know
	providers []ProviderInfo    // the datasets' providers, in dataset order
	rows      int

	memoMu   sync.RWMutex
	memo     map[string]map[string]*history // provider → model → history (nil: unknown)
	memoSize int
}

// memoLimit bounds the lookup memo, so a stream of made-up model ids cannot grow it
// without end; lookups past it are still answered, only not remembered.
const memoLimit = 10_000

// history is one model's prices over time (one provider, one canonical id): dated rows
// ascending by effective date, then rows limited to a time of day.
type history struct {
	provider, model string
	rows            []*ResolvedRow
	expr            *matchExpr // the dataset's match expression, kept by an override
	order           int
}

type index struct {
	exact    map[string]*history
	globs    []glob     // most specific first
	exprs    []*history // dataset models, in dataset order
	fallback []string   // providers whose models this one also serves
}

type glob struct {
	parts []string // the pattern split at '*'
	h     *history
	lits  int
}

// New builds a table from layers, later layers winning: a layer that has rows for a
// (provider, model) replaces every row of that model from the layers before it, so an
// override is never mixed with the dates of the price it replaces; the replaced model's
// dataset match expression stays, so its ids still find the override. Every invalid row is
// reported, naming its layer, index and field.
func New(layers ...Layer) (*Table, error) {
	type key struct{ provider, model string }
	merged := map[key]*history{}
	var order []key
	var errs []error
	t := &Table{families: map[string]*index{}, all: &index{exact: map[string]*history{}}, memo: map[string]map[string]*history{}}
	for _, l := range layers {
		for _, p := range l.Providers {
			t.providers = slices.DeleteFunc(t.providers, func(q ProviderInfo) bool { return q.ID == p.ID })
			t.providers = append(t.providers, p)
		}
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
			if r.TimeOfDay != nil {
				dk += "\x00" + r.TimeOfDay.Start + "\x00" + r.TimeOfDay.End
			}
			if dates[dk] {
				errs = append(errs, fmt.Errorf("%s: a second row for %s/%s effective %q in the same %s", path, rr.Provider, rr.Model, r.Effective, l.Name))
				continue
			}
			dates[dk] = true
			h := seen[k]
			if h == nil {
				h = &history{provider: k.provider, model: k.model}
				seen[k] = h
				if old := merged[k]; old == nil {
					order = append(order, k)
				} else {
					h.expr, h.order = old.expr, old.order
				}
				merged[k] = h
			}
			if rr.expr != nil {
				h.expr, h.order = rr.expr, rr.order
			}
			h.rows = append(h.rows, &rr)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, p := range t.providers {
		t.family(p.ID).fallback = p.Fallback
	}
	var withExpr []*history
	for _, k := range order {
		h := merged[k]
		sort.SliceStable(h.rows, func(i, j int) bool {
			a, b := h.rows[i], h.rows[j]
			if (a.window == nil) != (b.window == nil) {
				return a.window == nil
			}
			return a.Effective.Before(b.Effective)
		})
		t.rows += len(h.rows)
		fam := t.family(h.provider)
		// Every row's patterns count: a model renamed between dates keeps its old ids.
		for _, r := range h.rows {
			for _, p := range r.patterns {
				fam.add(p, h)
				t.all.add(p, h)
			}
		}
		if h.expr != nil {
			withExpr = append(withExpr, h)
		}
	}
	// Dataset models are tried in the dataset's order, as its calculator tries them; across
	// providers (a call naming none) in the order the providers are listed.
	rank := map[string]int{}
	for i, p := range t.providers {
		rank[Family(p.ID)] = i + 1
	}
	for _, k := range order { // providers no dataset lists: in the order their rows came
		if _, ok := rank[k.provider]; !ok {
			rank[k.provider] = len(rank) + 1
		}
	}
	sort.SliceStable(withExpr, func(i, j int) bool {
		a, b := withExpr[i], withExpr[j]
		if rank[a.provider] != rank[b.provider] {
			return rank[a.provider] < rank[b.provider]
		}
		return a.order < b.order
	})
	for _, h := range withExpr {
		t.families[h.provider].exprs = append(t.families[h.provider].exprs, h)
		t.all.exprs = append(t.all.exprs, h)
	}
	for _, ix := range append([]*index{t.all}, values(t.families)...) {
		sort.SliceStable(ix.globs, func(i, j int) bool { return ix.globs[i].lits > ix.globs[j].lits })
	}
	return t, nil
}

func (t *Table) family(id string) *index {
	fam := t.families[id]
	if fam == nil {
		fam = &index{exact: map[string]*history{}}
		t.families[id] = fam
	}
	return fam
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

// findOwn looks id up in the rows of models the dataset lacks: exact ids, then patterns.
func (ix *index) findOwn(id string) *history { return ix.findRows(id, false) }

// findOverride looks id up in the ids and patterns of overrides of dataset models.
func (ix *index) findOverride(id string) *history { return ix.findRows(id, true) }

func (ix *index) findRows(id string, dataset bool) *history {
	if h, ok := ix.exact[id]; ok && (h.expr != nil) == dataset {
		return h
	}
	for _, g := range ix.globs {
		if (g.h.expr != nil) == dataset && globMatch(g.parts, id) {
			return g.h
		}
	}
	return nil
}

// findDataset looks id up in the dataset's models, first match in dataset order.
func (ix *index) findDataset(id string) *history {
	for _, h := range ix.exprs {
		if h.expr.matches(id) {
			return h
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
