package pricing

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
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

// Lookup finds the row pricing a call to model from provider (a gen_ai.provider.name
// value) made at time at, choosing among the model's prices as the dataset's calculator
// does: from the last row back, a time-of-day row whose window holds at, else the dated
// row whose effective date is the latest on or before at (UTC). A call dated before a
// model's first price gets that first price (the model did not exist earlier; the span's
// clock is off). ok is false for a model the table does not know.
//
// The provider's own price wins: the provider (by its id, an alias of Family, or the
// dataset's provider_match) is searched first, with the providers it falls back to;
// then the vendor the id names ("anthropic/…", "anthropic.…") or whose model_match claims
// it; then every model.
func (t *Table) Lookup(provider, model string, at time.Time) (*ResolvedRow, bool) {
	h := t.history(provider, model)
	if h == nil {
		return nil, false
	}
	for i := len(h.rows) - 1; i >= 0; i-- {
		r := h.rows[i]
		if r.window != nil {
			if r.inWindow(at) {
				return r, true
			}
			continue
		}
		if !at.Before(r.Effective) {
			return r, true
		}
	}
	return h.rows[0], true
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
	cands := candidates(id)
	fam := t.providerFamily(provider)
	if h := t.findIn(fam, cands); h != nil {
		return h
	}
	for _, v := range t.vendors(cands) {
		if v != fam {
			if h := t.findIn(v, cands); h != nil {
				return h
			}
		}
	}
	return t.search(t.all, cands)
}

// search tries every candidate in three passes: rows of models the dataset lacks (a
// config's or a file's, which may name ids the dataset also claims: the later layer wins);
// the dataset's models by its match rules (an override of one is found there, in the
// model's place); then the overrides' own ids and patterns.
func (t *Table) search(ix *index, cands []string) *history {
	for _, find := range [...]func(*index, string) *history{(*index).findOwn, (*index).findDataset, (*index).findOverride} {
		for _, c := range cands {
			if h := find(ix, c); h != nil {
				return h
			}
			for _, fb := range ix.fallback {
				if f := t.families[Family(fb)]; f != nil {
					if h := find(f, c); h != nil {
						return h
					}
				}
			}
		}
	}
	return nil
}

// candidates are the forms of a model id tried in turn: the id as sent; with a compact
// date written as the dataset writes it (-20250514 → -2025-05-14); then without what
// resellers and SDKs add: "models/" (Gemini resource names), a vendor path
// ("anthropic/…"), a Bedrock id's vendor and version, a date suffix, "-latest".
func candidates(id string) []string {
	cands := []string{id}
	addc := func(c string) {
		if c != "" && !slices.Contains(cands, c) {
			cands = append(cands, c)
		}
	}
	addc(datasetDate(id))
	bare := strings.TrimPrefix(id, "models/")
	if i := strings.LastIndexByte(bare, '/'); i >= 0 {
		bare = bare[i+1:]
	}
	addc(bare)
	if m := bedrockID.FindStringSubmatch(bare); m != nil {
		bare = m[2]
		addc(bare)
	}
	addc(datasetDate(bare))
	if d := datedID.ReplaceAllString(bare, ""); d != bare {
		bare = d
		addc(bare)
	}
	addc(strings.TrimSuffix(bare, "-latest"))
	return cands
}

// compactDate is a -YYYYMMDD date inside an id, as genai-prices rewrites it.
var compactDate = regexp.MustCompile(`-(20\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(-|:|$)`)

// datasetDate writes -YYYYMMDD dates of id as -YYYY-MM-DD (real dates only).
func datasetDate(id string) string {
	return compactDate.ReplaceAllStringFunc(id, func(m string) string {
		p := compactDate.FindStringSubmatch(m)
		if _, err := time.Parse("20060102", p[1]+p[2]+p[3]); err != nil {
			return m
		}
		return "-" + p[1] + "-" + p[2] + "-" + p[3] + p[4]
	})
}

// providerFamily is the family a provider name files prices under: an alias Family knows
// or a provider the table has rows for, else the first dataset provider whose
// provider_match claims the name; "" when none does.
func (t *Table) providerFamily(provider string) string {
	fam := Family(provider)
	if fam == "" {
		return ""
	}
	if _, ok := t.families[fam]; ok {
		return fam
	}
	p := strings.ToLower(strings.TrimSpace(provider))
	for _, info := range t.providers {
		if info.providerMatch != nil && info.providerMatch.matches(p) {
			return Family(info.ID)
		}
	}
	return ""
}

// vendors are the families an id names: a vendor path's last part, a Bedrock id's vendor,
// and the dataset providers whose model_match claims one of its forms.
func (t *Table) vendors(cands []string) []string {
	var out []string
	id := strings.TrimPrefix(cands[0], "models/")
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		vendor := id[:i]
		if j := strings.LastIndexByte(vendor, '/'); j >= 0 {
			vendor = vendor[j+1:]
		}
		out = append(out, Family(vendor))
		id = id[i+1:]
	}
	if m := bedrockID.FindStringSubmatch(id); m != nil {
		out = append(out, Family(m[1]))
	}
	for _, c := range cands {
		for _, info := range t.providers {
			if info.modelMatch != nil && info.modelMatch.matches(c) && !slices.Contains(out, Family(info.ID)) {
				out = append(out, Family(info.ID))
			}
		}
	}
	return out
}

// findIn looks the candidates up in one family and the families it falls back to.
func (t *Table) findIn(fam string, cands []string) *history {
	ix := t.families[fam]
	if ix == nil {
		return nil
	}
	return t.search(ix, cands)
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
	case "aws.bedrock", "bedrock", "aws":
		return "aws"
	case "azure.ai.openai", "azure.ai.inference", "az.ai.openai", "az.ai.inference", "azure", "azure_openai":
		return "azure"
	case "x_ai", "xai", "x-ai":
		return "x-ai"
	}
	return p
}
