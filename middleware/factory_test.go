package middleware

import (
	"context"
	"errors"
	"sync"

	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/model"
)

// testProviders backs the "middleware-test" provider: config.Model.Name → provider.
var testProviders sync.Map

type missingProvider struct{}

func (missingProvider) Generate(context.Context, *model.Request) (*model.Response, error) {
	return nil, errors.New("no test provider registered under this name")
}

func init() {
	model.Register("middleware-test", func(cfg config.Model) (model.Provider, error) {
		if p, ok := testProviders.Load(cfg.Name); ok {
			return p.(model.Provider), nil
		}
		return missingProvider{}, nil
	})
}

func testModelConfigs(names ...string) []config.Model {
	out := make([]config.Model, len(names))
	for i, n := range names {
		out[i] = config.Model{Name: n, Provider: "middleware-test", Model: n + "-model"}
	}
	return out
}
