package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/agentmeter/agentmeter/middleware"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/model"
)

func init() {
	commands["chain"] = command{summary: "print the lead agent's middleware chain and per-hook order: chain [--config FILE] [--json]", run: chainCommand}
}

// chainOutput is the --json shape of `agentmeter chain`.
type chainOutput struct {
	Middlewares []string             `json:"middlewares"`
	Hooks       middleware.HookOrder `json:"hooks"`
}

// infoOnlyModel carries a configured model's Info without building its provider, so
// `agentmeter chain` works without API keys (only supports_vision matters here).
type infoOnlyModel struct{ info model.Info }

func (m infoOnlyModel) Info() model.Info { return m.info }
func (m infoOnlyModel) Generate(context.Context, *model.Request) (*model.Response, error) {
	return nil, errors.New("agentmeter chain: models are not called")
}

func chainCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config.yaml (default: the built-in offline demo configuration)")
	asJSON := fs.Bool("json", false, `print {"middlewares": [...], "hooks": {...}}`)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: agentmeter chain [--config FILE] [--json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agentmeter chain: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "agentmeter chain: %v\n", err)
		return 1
	}
	chain, err := chainFromConfig(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "agentmeter chain: %v\n", err)
		return 1
	}
	out := chainOutput{Middlewares: middleware.Names(chain), Hooks: middleware.Hooks(chain)}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "agentmeter chain: %v\n", err)
			return 1
		}
		return 0
	}
	printChain(stdout, out)
	return 0
}

// chainFromConfig assembles the lead chain of cfg without building model providers.
func chainFromConfig(cfg *config.Config) ([]agent.Middleware, error) {
	lead, ok := cfg.ModelByName(cfg.Agent.Model)
	if !ok {
		return nil, fmt.Errorf("agent.model %q is not configured", cfg.Agent.Model)
	}
	opts := chainOptions(cfg)
	opts.Model = infoOnlyModel{model.InfoFromConfig(lead)}
	return middleware.BuildMiddlewares(opts)
}

// chainOptions are the middleware options of a config (shared by run and chain).
func chainOptions(cfg *config.Config) middleware.Options {
	mc := middleware.ConfigFrom(cfg)
	subagents := config.BoolOr(cfg.Subagents.Enabled, true) && mc.Settings.Subagent.Enabled
	return middleware.Options{Config: mc, SubagentEnabled: &subagents}
}

func printChain(w io.Writer, out chainOutput) {
	fmt.Fprintln(w, "middlewares (list order):")
	for i, n := range out.Middlewares {
		fmt.Fprintf(w, "  %2d. %s\n", i+1, n)
	}
	fmt.Fprintln(w, "\nexecution order per hook:")
	for _, h := range []struct {
		name  string
		names []string
		note  string
	}{
		{"before_agent", out.Hooks.BeforeAgent, "list order"},
		{"before_model", out.Hooks.BeforeModel, "list order"},
		{"wrap_model_call", out.Hooks.WrapModelCall, "outermost first"},
		{"after_model", out.Hooks.AfterModel, "reverse list order"},
		{"wrap_tool_call", out.Hooks.WrapToolCall, "outermost first"},
		{"after_agent", out.Hooks.AfterAgent, "reverse list order"},
	} {
		list := strings.Join(h.names, " → ")
		if list == "" {
			list = "(none)"
		}
		fmt.Fprintf(w, "  %-16s (%s): %s\n", h.name, h.note, list)
	}
}
