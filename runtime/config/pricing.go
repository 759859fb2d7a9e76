package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentmeter/agentmeter/pricing"
)

// PricingSection is config.yaml's `pricing:` section: where the run journal gets a newer
// price dataset than the embedded snapshot, as the collector's genaicost price_refresh.
type PricingSection struct {
	PriceRefresh *PriceRefresh `yaml:"price_refresh"`
}

// PriceRefresh is where and how often to fetch a newer genai-prices dataset.
type PriceRefresh struct {
	URL      string        `yaml:"url"`
	Interval time.Duration `yaml:"interval"` // default 24h, at least 1s
	Timeout  time.Duration `yaml:"timeout"`  // default 30s
}

func init() { RegisterSection("pricing", func() any { return &PricingSection{} }) }

// Validate names the key of every problem.
func (s *PricingSection) Validate() error {
	if r := s.PriceRefresh; r != nil {
		return errors.Join(pricing.CheckRefreshSettings("pricing.price_refresh", r.URL, r.Interval, r.Timeout)...)
	}
	return nil
}

// priceBuilder builds the journal's table from a dataset: the dataset with the overrides
// (the collector's default table too), each configured model's `pricing` block replacing
// the rows of that model id. A cache_read of 0 means "not given" (the input rate applies).
func (c *Config) priceBuilder() func(*pricing.Dataset) (*pricing.Table, error) {
	var rows []pricing.Row
	for i, m := range c.Models {
		if m.Pricing == nil || m.Model == "" {
			continue
		}
		r := pricing.Row{Provider: m.Provider, Model: m.Model, Source: fmt.Sprintf("config models[%d].pricing", i),
			Rates: pricing.Rates{Input: pricing.F(m.Pricing.Input), Output: pricing.F(m.Pricing.Output)}}
		if m.Pricing.CacheRead > 0 {
			r.CacheRead = pricing.F(m.Pricing.CacheRead)
		}
		rows = append(rows, r)
	}
	return func(ds *pricing.Dataset) (*pricing.Table, error) {
		t, err := pricing.New(append(pricing.WithDataset(ds), pricing.Layer{Name: "models[].pricing", Rows: rows})...)
		if err != nil {
			return nil, fmt.Errorf("models[].pricing: %w", err)
		}
		return t, nil
	}
}

// PriceTable is the price table the run journal prices calls with (see priceBuilder),
// from the embedded snapshot.
func (c *Config) PriceTable() (*pricing.Table, error) {
	return c.priceBuilder()(pricing.DefaultDataset())
}

// Pricer is the run journal's pricer. With pricing.price_refresh set it refreshes the
// table in the background (the first fetch at once; calls are priced with the table in
// use, never waiting for one); stop ends that. onResult, when set, is told each refresh.
func (c *Config) Pricer(onResult func(pricing.RefreshResult)) (p pricing.JournalPricer, stop func(), err error) {
	build := c.priceBuilder()
	initial, err := pricing.SnapshotActive(build)
	if err != nil {
		return pricing.JournalPricer{}, nil, err
	}
	sec, _ := c.Sections["pricing"].(*PricingSection)
	if sec == nil || sec.PriceRefresh == nil {
		return pricing.JournalPricer{Table: initial.Table}, func() {}, nil
	}
	r := sec.PriceRefresh
	rf := pricing.NewRefresher(initial, pricing.RefresherOptions{
		URL: r.URL, Interval: r.Interval, Client: pricing.RefreshClient(r.Timeout), Build: build, OnResult: onResult,
	})
	rf.Start()
	return pricing.JournalPricer{Live: func() *pricing.Table { return rf.Current().Table }}, rf.Stop, nil
}
