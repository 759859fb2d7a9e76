package main

// Wires the middleware chain into `agentmeter run`: run.go exposes leadMiddlewares and
// subagentMiddlewares as replaceable builders; this file installs DeerFlow's chain
// (middleware.BuildMiddlewares / BuildSubagentMiddlewares) assembled from config.yaml.

import (
	"sync"

	"github.com/agentmeter/agentmeter/middleware"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/subagent"
)

func init() {
	leadMiddlewares = func(env MiddlewareEnv) ([]agent.Middleware, error) {
		opts := chainOptions(env.Config)
		opts.Model, opts.Models = env.Lead, env.Models
		return middleware.BuildMiddlewares(opts)
	}
	// One subagent chain per run command, shared by every subagent (middlewares are safe
	// for concurrent runs); built on first use so a bad config surfaces at the lead build.
	var (
		once  sync.Once
		chain []agent.Middleware
	)
	subagentMiddlewares = func(env MiddlewareEnv, _ subagent.Type) []agent.Middleware {
		once.Do(func() {
			opts := chainOptions(env.Config)
			opts.Model, opts.Models = env.Lead, env.Models
			c, err := middleware.BuildSubagentMiddlewares(opts)
			if err == nil {
				chain = c
			}
		})
		return chain
	}
}
