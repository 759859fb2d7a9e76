package pricing

// Finding a model call's row: the provider's own models first, by the dataset's match
// rules and agentmeter's own rows, then the vendor the id names, then every model.

import (
	"regexp"
	"slices"
	"strings"
	"time"
)

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
