package attrsplit

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/pipeline"
)

// Config is the connector's configuration.
type Config struct {
	// Attribute is the span attribute key a span is split by: it carries it when the key
	// is there with a value (an empty string counts; OTTL's `attributes[key] != nil`).
	Attribute string `mapstructure:"attribute"`
	// Pipelines are where the spans go.
	Pipelines Pipelines `mapstructure:"pipelines"`
}

// Pipelines are the connector's three lists of traces pipelines. A pipeline is in one
// list at most: it would get a span twice otherwise.
type Pipelines struct {
	// All get every batch whole, as it came.
	All []pipeline.ID `mapstructure:"all"`
	// With get a batch's spans that carry the attribute (a copy), when there are any.
	With []pipeline.ID `mapstructure:"with"`
	// Without get a batch's spans that do not carry it (a copy), when there are any.
	Without []pipeline.ID `mapstructure:"without"`
}

// createDefaultConfig names no attribute and no pipeline: a config must give them.
func createDefaultConfig() *Config {
	return &Config{Pipelines: Pipelines{All: []pipeline.ID{}, With: []pipeline.ID{}, Without: []pipeline.ID{}}}
}

// Validate reports every problem at once, each naming its key.
func (c *Config) Validate() error {
	var errs []error
	if c.Attribute == "" {
		errs = append(errs, errors.New("attribute: the span attribute key to split by is required"))
	}
	p := c.Pipelines
	if len(p.All)+len(p.With)+len(p.Without) == 0 {
		errs = append(errs, errors.New("pipelines: name at least one pipeline under all, with or without"))
	}
	seen := map[pipeline.ID]string{}
	for _, l := range []struct {
		key string
		ids []pipeline.ID
	}{{"all", p.All}, {"with", p.With}, {"without", p.Without}} {
		for i, id := range l.ids {
			key := fmt.Sprintf("pipelines::%s[%d]", l.key, i)
			if id.Signal() != pipeline.SignalTraces {
				errs = append(errs, fmt.Errorf("%s: %s is a %s pipeline; the connector passes traces on only", key, id, id.Signal()))
			}
			if first, dup := seen[id]; dup {
				errs = append(errs, fmt.Errorf("%s: %s is listed under %s already; a pipeline in two lists would get spans twice", key, id, first))
				continue
			}
			seen[id] = l.key
		}
	}
	return errors.Join(errs...)
}
