package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"

	"go.yaml.in/yaml/v3"
)

var (
	sectionsMu sync.RWMutex
	sections   = map[string]func() any{}
)

// RegisterSection declares an extra top-level config.yaml section (e.g. a middleware's
// "title:" settings) so strict loading accepts it. newValue returns a pointer to a fresh
// struct with its defaults set; the section is decoded into it with unknown keys
// rejected, and the result is available as Config.Sections[name]. If the value has a
// Validate() error method, Config.Validate calls it. Register from an init function;
// registering a built-in or already registered name panics (a programming error).
func RegisterSection(name string, newValue func() any) {
	sectionsMu.Lock()
	defer sectionsMu.Unlock()
	if _, dup := sections[name]; dup || builtinKeys[name] {
		panic(fmt.Sprintf("config: section %q registered twice", name))
	}
	sections[name] = newValue
}

var builtinKeys = map[string]bool{"models": true, "agent": true, "subagents": true, "sandbox": true, "telemetry": true}

// LoadFile reads, decodes, defaults and validates a config file.
func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// fileConfig is the file's top level: the built-in sections decoded strictly in place
// (so errors carry the file's own line numbers) and every other key collected for the
// registered sections.
type fileConfig struct {
	Models    []Model              `yaml:"models"`
	Agent     Agent                `yaml:"agent"`
	Subagents Subagents            `yaml:"subagents"`
	Sandbox   Sandbox              `yaml:"sandbox"`
	Telemetry Telemetry            `yaml:"telemetry"`
	Rest      map[string]yaml.Node `yaml:",inline"`
}

// Parse decodes YAML strictly (unknown keys are errors naming the key and line), applies
// defaults and validates.
func Parse(data []byte) (*Config, error) {
	var fc fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
		return nil, cleanYAMLError(err, 0)
	}
	cfg := &Config{Models: fc.Models, Agent: fc.Agent, Subagents: fc.Subagents, Sandbox: fc.Sandbox,
		Telemetry: fc.Telemetry, Sections: map[string]any{}}
	var errs []error
	keys := slices.Sorted(maps.Keys(fc.Rest))
	sectionsMu.RLock()
	defer sectionsMu.RUnlock()
	for _, key := range keys {
		node := fc.Rest[key]
		newValue, ok := sections[key]
		if !ok {
			errs = append(errs, fmt.Errorf("line %d: unknown key %q", node.Line, key))
			continue
		}
		dst := newValue()
		cfg.Sections[key] = dst
		if err := decodeStrict(&node, dst); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Registered sections absent from the file still get their defaults.
	for name, newValue := range sections {
		if _, ok := cfg.Sections[name]; !ok {
			cfg.Sections[name] = newValue()
		}
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// decodeStrict re-encodes one section node and decodes it with KnownFields, which yaml.v3
// only offers on a Decoder. Line numbers in its errors are shifted back to the file's.
func decodeStrict(node *yaml.Node, dst any) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(node); err != nil {
		return err
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	if err := dec.Decode(dst); err != nil {
		return cleanYAMLError(err, node.Line-1)
	}
	return nil
}

// cleanYAMLError keeps yaml's message but drops the Go type names it mentions, so users
// see "unknown key" wording.
func cleanYAMLError(err error, lineOffset int) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]error, 0, len(te.Errors))
		for _, e := range te.Errors {
			msgs = append(msgs, errors.New(rewriteUnknown(e, lineOffset)))
		}
		return errors.Join(msgs...)
	}
	return fmt.Errorf("parse yaml: %w", err)
}
