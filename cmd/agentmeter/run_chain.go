package main

// The lead agent's and the subagents' middleware chains: DeerFlow's chain
// (middleware.BuildMiddlewares / BuildSubagentMiddlewares) assembled from config.yaml.

import (
	"sync"

	"github.com/agentmeter/agentmeter/middleware"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/subagent"
)

// leadMiddlewares builds the lead agent's middleware chain.
func leadMiddlewares(env MiddlewareEnv) ([]agent.Middleware, error) {
	opts := chainOptions(env.Config)
	opts.Model, opts.Models, opts.MemoryStore = env.Lead, env.Models, env.Memory
	return middleware.BuildMiddlewares(opts)
}

// subagentMiddlewares returns the subagent executor's chain builder: one chain per lead
// agent, shared by every subagent type (middlewares are safe for concurrent runs), built
// on first use; a bad config already failed leadMiddlewares at the lead build.
func subagentMiddlewares(env MiddlewareEnv) func(subagent.Type) []agent.Middleware {
	var (
		once  sync.Once
		chain []agent.Middleware
	)
	return func(subagent.Type) []agent.Middleware {
		once.Do(func() {
			opts := chainOptions(env.Config)
			opts.Model, opts.Models = env.Lead, env.Models
			if c, err := middleware.BuildSubagentMiddlewares(opts); err == nil {
				chain = c
			}
		})
		return chain
	}
}
