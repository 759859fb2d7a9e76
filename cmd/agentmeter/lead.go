package main

// The lead agent's construction from config.yaml: the one path both `run` (one agent per
// run) and `serve` (one agent reused by every run) take — models, built-in tools, the
// subagent executor with the task tool, agent.tools filtering and the middleware chain
// (run_chain.go).

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentmeter/agentmeter/middleware"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/sandbox"
	"github.com/agentmeter/agentmeter/runtime/subagent"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

// LeadAgent is a configured lead agent; Agent.Run may be called concurrently.
type LeadAgent struct {
	Agent  *agent.Agent
	Config *config.Config
	Models *model.Factory
	// ModelName is the lead model's provider id (what runs.model_name records).
	ModelName   string
	SandboxRoot string
}

// MiddlewareEnv is what the middleware chain builders get from the lead agent's build.
type MiddlewareEnv struct {
	Config *config.Config
	Models *model.Factory
	Lead   model.ChatModel
	// Memory keeps the per-user memory (nil: files under settings.runtime.base_dir).
	Memory middleware.MemoryStore
}

// LeadOptions are what the caller of NewLeadAgent adds to the config.
type LeadOptions struct {
	// Memory keeps MemoryMiddleware's per-user memory; `serve` passes the run store so
	// every replica shares it. nil: files under settings.runtime.base_dir.
	Memory middleware.MemoryStore
}

// NewLeadAgent builds the lead agent of cfg.
func NewLeadAgent(cfg *config.Config, opts LeadOptions) (*LeadAgent, error) {
	models, err := model.NewFactory(cfg.Models)
	if err != nil {
		return nil, err
	}
	lead, err := models.Get(cfg.Agent.Model)
	if err != nil {
		return nil, fmt.Errorf("agent.model: %w", err)
	}
	subModel := lead
	if cfg.Subagents.Model != "" {
		if subModel, err = models.Get(cfg.Subagents.Model); err != nil {
			return nil, fmt.Errorf("subagents.model: %w", err)
		}
	}
	root := cfg.Sandbox.Root
	if root == "" {
		root = filepath.Join(os.TempDir(), "agentmeter", "threads")
	}
	base := tool.Builtins(tool.Bash{Timeout: cfg.Sandbox.BashTimeout}, nil)
	env := MiddlewareEnv{Config: cfg, Models: models, Lead: lead, Memory: opts.Memory}
	tools := base
	if config.BoolOr(cfg.Subagents.Enabled, true) {
		exec, err := subagent.NewExecutor(subagent.Options{
			Model: subModel, Tools: base, MaxConcurrent: cfg.Subagents.MaxConcurrent,
			Timeout: cfg.Subagents.Timeout, MaxTurns: cfg.Subagents.MaxTurns,
			Middlewares: subagentMiddlewares(env),
		})
		if err != nil {
			return nil, err
		}
		tools = append(append([]tool.Tool(nil), base...), &subagent.TaskTool{Executor: exec})
	}
	if tools, err = enabledTools(tools, cfg.Agent.Tools); err != nil {
		return nil, err
	}
	mws, err := leadMiddlewares(env)
	if err != nil {
		return nil, fmt.Errorf("middlewares: %w", err)
	}
	a, err := agent.New(agent.Config{
		Model: lead, Models: models, Tools: tools, Middlewares: mws,
		SystemPrompt: cfg.Agent.SystemPrompt, RecursionLimit: cfg.Agent.RecursionLimit,
	})
	if err != nil {
		return nil, err
	}
	name := lead.Info().Model
	if name == "" {
		name = lead.Info().Name // e.g. the scripted provider without a model id
	}
	return &LeadAgent{Agent: a, Config: cfg, Models: models, ModelName: name, SandboxRoot: root}, nil
}

// Sandbox returns the workspace of threadID.
func (l *LeadAgent) Sandbox(threadID string) (sandbox.Sandbox, error) {
	return sandbox.NewLocal(l.SandboxRoot, threadID)
}
