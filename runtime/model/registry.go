package model

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/agentmeter/agentmeter/runtime/config"
)

// Constructor builds a provider for one configured model. It validates the config and
// returns an error naming the YAML key for bad settings (e.g. the api_key_env variable
// being unset) — never a panic, never the key's value.
type Constructor func(cfg config.Model) (Provider, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Constructor{}
)

// Register makes a provider available under name (config.Model.Provider). Call it from an
// init function; registering a name twice panics (a programming error).
func Register(name string, ctor Constructor) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("model: provider %q registered twice", name))
	}
	registry[name] = ctor
}

// Providers lists the registered provider names, sorted.
func Providers() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := slices.Sorted(maps.Keys(registry))
	return names
}

func lookup(name string) (Constructor, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	c, ok := registry[name]
	return c, ok
}

// New builds the configured model: the registered provider wrapped with tracing
// (Wrap). An unregistered provider is an error listing the registered ones.
func New(cfg config.Model) (ChatModel, error) {
	ctor, ok := lookup(cfg.Provider)
	if !ok {
		return nil, fmt.Errorf("model %q: provider %q is not available (registered: %v)", cfg.Name, cfg.Provider, Providers())
	}
	p, err := ctor(cfg)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", cfg.Name, err)
	}
	info := InfoFromConfig(cfg)
	if info.Model == "" {
		// Providers with a default model id (scripted) name it, so the chat span never
		// reads "chat " with an empty gen_ai.request.model.
		if n, ok := p.(interface{ ModelName() string }); ok {
			info.Model = n.ModelName()
		}
	}
	return Wrap(p, info), nil
}

// InfoFromConfig derives Info from a config entry.
func InfoFromConfig(cfg config.Model) Info {
	return Info{
		Name:             cfg.Name,
		Provider:         cfg.Provider,
		Model:            cfg.Model,
		SupportsVision:   cfg.SupportsVision,
		SupportsThinking: cfg.SupportsThinking,
		ContextWindow:    cfg.ContextWindow,
		Stream:           cfg.StreamEnabled(),
	}
}

// Factory builds and caches the models of one config; models are safe for concurrent
// use, so one instance per name is shared by the lead agent, subagents and middlewares.
type Factory struct {
	cfg    []config.Model
	mu     sync.Mutex
	models map[string]ChatModel
}

// NewFactory builds every configured model up front, so a bad entry fails at start.
func NewFactory(models []config.Model) (*Factory, error) {
	if len(models) == 0 {
		return nil, fmt.Errorf("models: at least one model is required")
	}
	f := &Factory{cfg: models, models: map[string]ChatModel{}}
	for _, m := range models {
		cm, err := New(m)
		if err != nil {
			return nil, err
		}
		f.models[m.Name] = cm
	}
	return f, nil
}

// Get returns the model called name; "" is the default (the first configured model).
func (f *Factory) Get(name string) (ChatModel, error) {
	if name == "" {
		name = f.cfg[0].Name
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.models[name]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("model %q is not configured", name)
}

// Default returns the first configured model.
func (f *Factory) Default() ChatModel {
	m, _ := f.Get("")
	return m
}
