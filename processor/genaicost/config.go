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
	FormatAgentmeter  = "agentmeter"   // a YAML or JSON list of rows, like pricing/prices.yaml
	FormatLiteLLM     = "litellm"      // LiteLLM's model_prices_and_context_window.json
	FormatGenAIPrices = "genai_prices" // pydantic genai-prices' data.json
)

// Config is the genaicost processor's configuration.
type Config struct {
	// DefaultPrices turns the built-in price table on (OpenAI, Anthropic, Google,
	// DeepSeek, Mistral; pricing/prices.yaml). Default: true.
	DefaultPrices bool `mapstructure:"default_prices"`

	// PriceFiles are loaded after the default table, in order; a file that prices a model
	// replaces every earlier row of that model (all dates).
	PriceFiles []PriceFile `mapstructure:"price_files"`

	// Prices are rows of this config, applied last: they add models or replace a model's
	// rows from the default table and the files.
	Prices []pricing.Row `mapstructure:"prices"`
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
	_, err := c.buildTable()
	return err
}

func (c *Config) buildTable() (*pricing.Table, error) {
	var errs []error
	var layers []pricing.Layer
	if c.DefaultPrices {
		layers = append(layers, pricing.DefaultLayers()...)
	}
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
	if len(layers) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("no prices: default_prices is false and neither price_files nor prices is set"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return pricing.New(layers...)
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
