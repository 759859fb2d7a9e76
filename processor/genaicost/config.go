package genaicost

import (
	"errors"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/collector/confmap"

	"github.com/agentmeter/agentmeter/pricing"
)

// Price file formats (price_files[].format).
const (
	FormatAgentmeter  = "agentmeter"   // a YAML or JSON list of rows, like pricing/overrides.yaml
	FormatLiteLLM     = "litellm"      // LiteLLM's model_prices_and_context_window.json
	FormatGenAIPrices = "genai_prices" // pydantic genai-prices' data.json
)

// Config is the genaicost processor's configuration.
type Config struct {
	// DefaultPrices turns the built-in price table on: the genai-prices snapshot
	// (pricing/genai-prices.json) with agentmeter's overrides. Default: true.
	DefaultPrices bool `mapstructure:"default_prices"`

	// PriceFiles are loaded after the default table, in order; a file that prices a model
	// replaces every earlier row of that model (all dates).
	PriceFiles []PriceFile `mapstructure:"price_files"`

	// Prices are rows of this config, applied last: they add models or replace a model's
	// rows from the default table and the files.
	Prices []pricing.Row `mapstructure:"prices"`

	// PriceRefresh, when set, loads a newer genai-prices dataset at runtime in place of
	// the embedded snapshot (the overrides, files and rows above stay on top).
	PriceRefresh *PriceRefresh `mapstructure:"price_refresh"`
}

// PriceRefresh is where and how often to fetch a newer dataset.
type PriceRefresh struct {
	// URL serves a genai-prices data.json (or a snapshot like pricing/genai-prices.json),
	// e.g. https://raw.githubusercontent.com/pydantic/genai-prices/main/prices/new_data/v2/data.json.
	URL string `mapstructure:"url"`
	// Interval between refreshes; the first is at start. Default 24h, at least 1s.
	Interval time.Duration `mapstructure:"interval"`
	// Timeout bounds one refresh. Default 30s.
	Timeout time.Duration `mapstructure:"timeout"`
}

func (r *PriceRefresh) validate(defaultPrices bool) []error {
	errs := pricing.CheckRefreshSettings("price_refresh", r.URL, r.Interval, r.Timeout)
	if !defaultPrices {
		errs = append(errs, errors.New("price_refresh refreshes the default table: it needs default_prices: true"))
	}
	return errs
}

// PriceFile is one price file to load at start.
type PriceFile struct {
	Path string `mapstructure:"path"`
	// Format is agentmeter, litellm or genai_prices. Default: agentmeter.
	Format string `mapstructure:"format"`
}

func createDefaultConfig() *Config {
	return &Config{DefaultPrices: true, PriceFiles: []PriceFile{}, Prices: []pricing.Row{}}
}

// Validate loads every price file and builds the table, reporting every problem at once,
// each naming its YAML key.
func (c *Config) Validate() error {
	var errs []error
	if c.PriceRefresh != nil {
		errs = c.PriceRefresh.validate(c.DefaultPrices)
	}
	if _, err := c.buildTable(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c *Config) buildTable() (*pricing.Table, error) {
	build, err := c.tableBuilder()
	if err != nil {
		return nil, err
	}
	return build(pricing.DefaultDataset())
}

// tableBuilder loads the files once and returns what builds the table from a dataset
// (the snapshot, or a refreshed one): the dataset and the overrides when default_prices is
// on, then the files and the config's rows.
func (c *Config) tableBuilder() (func(*pricing.Dataset) (*pricing.Table, error), error) {
	layers, err := c.ownLayers()
	if err != nil {
		return nil, err
	}
	return func(ds *pricing.Dataset) (*pricing.Table, error) {
		var all []pricing.Layer
		if c.DefaultPrices {
			all = append(all, pricing.WithDataset(ds)...)
		}
		return pricing.New(append(all, layers...)...)
	}, nil
}

// ownLayers are the files' and the config's rows.
func (c *Config) ownLayers() ([]pricing.Layer, error) {
	var errs []error
	var layers []pricing.Layer
	for i, f := range c.PriceFiles {
		key := fmt.Sprintf("price_files[%d]", i)
		rows, err := f.load(key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		layers = append(layers, pricing.Layer{Name: key + " (" + f.Path + ")", Rows: rows})
	}
	if len(c.Prices) > 0 {
		layers = append(layers, pricing.Layer{Name: "prices", Rows: c.Prices})
	}
	if !c.DefaultPrices && len(layers) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("no prices: default_prices is false and neither price_files nor prices is set"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return layers, nil
}

func (f PriceFile) load(key string) ([]pricing.Row, error) {
	if f.Path == "" {
		return nil, fmt.Errorf("%s.path must be set", key)
	}
	var parse func([]byte) ([]pricing.Row, error)
	switch f.Format {
	case "", FormatAgentmeter:
		parse = pricing.ParseRows
	case FormatLiteLLM:
		parse = func(b []byte) ([]pricing.Row, error) { return pricing.ParseLiteLLM(b, f.Path) }
	case FormatGenAIPrices:
		parse = func(b []byte) ([]pricing.Row, error) { return pricing.ParseGenAIPrices(b, f.Path) }
	default:
		return nil, fmt.Errorf("%s.format must be %s, %s or %s, got %q", key, FormatAgentmeter, FormatLiteLLM, FormatGenAIPrices, f.Format)
	}
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, fmt.Errorf("%s.path: %w", key, err)
	}
	rows, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if f.Format == "" || f.Format == FormatAgentmeter {
		for i := range rows {
			if rows[i].Source == "" {
				rows[i].Source = f.Path
			}
		}
	}
	return rows, nil
}

// Unmarshal accepts an unquoted effective date (`effective: 2025-06-01`), which the YAML
// parser reads as a timestamp, by turning it back into its date before decoding.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	raw := conf.ToStringMap()
	if rows, ok := raw["prices"].([]any); ok {
		for _, r := range rows {
			if m, ok := r.(map[string]any); ok {
				if t, ok := m["effective"].(time.Time); ok {
					m["effective"] = t.UTC().Format(time.DateOnly)
				}
			}
		}
	}
	type plain Config // without this method, so decoding does not recurse
	return confmap.NewFromStringMap(raw).Unmarshal((*plain)(c))
}
