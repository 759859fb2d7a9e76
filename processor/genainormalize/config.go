package genainormalize

import (
	"errors"
	"fmt"
	"slices"
)

// Convention names, as written in the conventions list.
const (
	ConvSemconv       = "semconv"       // older GenAI semconv names (gen_ai.system, prompt/completion tokens)
	ConvOpenLLMetry   = "openllmetry"   // Traceloop's own names (llm.usage.*, flat cache keys, traceloop.span.kind)
	ConvOpenInference = "openinference" // Arize OpenInference (llm.*, openinference.span.kind)
	ConvAISDK         = "ai_sdk"        // Vercel AI SDK legacy telemetry (ai.*)
	ConvLangChain     = "langchain"     // LangChain run metadata (ls_provider, ls_model_name)
)

// allConventions lists every convention, in the order the docs table uses.
var allConventions = []string{ConvSemconv, ConvOpenLLMetry, ConvOpenInference, ConvAISDK, ConvLangChain}

// Config is the genainormalize processor's configuration.
type Config struct {
	// Conventions lists the foreign conventions whose attributes are mapped. A convention
	// left out is not read at all (its attributes pass through untouched), for an
	// emitter whose attribute names collide with one of them. Recognising model-call
	// spans (genai.IsModelCallSpan) does not depend on this list: it is the one rule
	// every reader shares.
	// Default: every convention.
	Conventions []string `mapstructure:"conventions"`
}

func createDefaultConfig() *Config {
	return &Config{Conventions: slices.Clone(allConventions)}
}

// Validate reports every problem at once, each naming its YAML key.
func (c *Config) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, name := range c.Conventions {
		switch {
		case !slices.Contains(allConventions, name):
			errs = append(errs, fmt.Errorf("conventions[%d]: unknown convention %q (known: %v)", i, name, allConventions))
		case seen[name]:
			errs = append(errs, fmt.Errorf("conventions[%d]: %q is listed twice", i, name))
		}
		seen[name] = true
	}
	return errors.Join(errs...)
}

// mask turns the list into the bit set the span loop checks.
func (c *Config) mask() convMask {
	var m convMask
	for _, name := range c.Conventions {
		if i := slices.Index(allConventions, name); i >= 0 {
			m |= 1 << i
		}
	}
	return m
}
