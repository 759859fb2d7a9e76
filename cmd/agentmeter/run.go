package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/agentmeter/agentmeter/pricing"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	_ "github.com/agentmeter/agentmeter/runtime/model/anthropic" // registers provider "anthropic"
	_ "github.com/agentmeter/agentmeter/runtime/model/openai"    // registers provider "openai"
	_ "github.com/agentmeter/agentmeter/runtime/model/scripted"  // registers provider "scripted"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

func init() {
	commands["run"] = command{summary: "run the lead agent once: run [--config FILE] [--thread ID] [--json] PROMPT", run: runCommand}
}

// demoConfigYAML is the built-in configuration used without --config: the scripted model
// with its embedded demo script and demo prices, so `agentmeter run` works offline on a
// fresh machine and shows cost.
//
//go:embed demo-config.yaml
var demoConfigYAML string

// runOutput is the --json object.
type runOutput struct {
	Answer     string                 `json:"answer"`
	ThreadID   string                 `json:"thread_id"`
	RunID      string                 `json:"run_id"`
	TraceID    string                 `json:"trace_id"`
	Completion journal.CompletionData `json:"completion"`
	// StopReason is set when a guard stopped the run (budget_capped, token_capped, ...).
	StopReason string `json:"stop_reason,omitempty"`
}

func runCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config.yaml (default: the built-in offline demo configuration)")
	threadID := fs.String("thread", "", "thread id (default: a new thread)")
	userID := fs.String("user", "", "user id (enduser.id)")
	asJSON := fs.Bool("json", false, "print one JSON object {answer, thread_id, run_id, trace_id, completion}")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: agentmeter run [--config FILE] [--thread ID] [--json] PROMPT")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	prompt := strings.TrimSpace(strings.Join(fs.Args(), " "))
	if prompt == "" {
		fmt.Fprintln(stderr, "agentmeter run: a PROMPT is required")
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out, err := runOnce(ctx, runOptions{ConfigPath: *cfgPath, ThreadID: *threadID, UserID: *userID, Prompt: prompt, Warnings: stderr})
	if err != nil {
		fmt.Fprintf(stderr, "agentmeter run: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "agentmeter run: %v\n", err)
			return 1
		}
		return 0
	}
	printText(stdout, out)
	return 0
}

type runOptions struct {
	ConfigPath string
	ThreadID   string
	UserID     string
	Prompt     string
	Warnings   io.Writer
}

// loadConfig reads --config or the built-in demo configuration.
func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Parse([]byte(demoConfigYAML))
	}
	return config.LoadFile(path)
}

func runOnce(ctx context.Context, o runOptions) (*runOutput, error) {
	cfg, err := loadConfig(o.ConfigPath)
	if err != nil {
		return nil, err
	}
	tel, err := telemetry.Setup(ctx, telemetry.Options{
		Enabled: config.BoolOr(cfg.Telemetry.Enabled, true), ServiceName: cfg.Telemetry.ServiceName,
		ServiceVersion: version, ExportTimeout: cfg.Telemetry.ExportTimeout, Warnings: o.Warnings,
	})
	if err != nil {
		return nil, err
	}
	// Flush spans whatever happens, bounded by the export timeout: never hang on a
	// missing collector.
	defer tel.Shutdown(context.Background())
	ctx = telemetry.WithContentCapture(ctx, cfg.Telemetry.CaptureContent)

	lead, err := NewLeadAgent(cfg, LeadOptions{})
	if err != nil {
		return nil, err
	}
	threadID := o.ThreadID
	if threadID == "" {
		threadID = "thread-" + model.NewCallID()[:12]
	}
	runID := "run-" + model.NewCallID()[:12]
	sb, err := lead.Sandbox(threadID)
	if err != nil {
		return nil, fmt.Errorf("--thread: %w", err)
	}
	pricer, stopPrices, err := cfg.Pricer(func(r pricing.RefreshResult) {
		if r.Err != nil && o.Warnings != nil {
			fmt.Fprintf(o.Warnings, "agentmeter: %v; pricing with dataset %s\n", r.Err, r.Active.Version)
		}
	})
	if err != nil {
		return nil, err
	}
	defer stopPrices()
	j := journal.New(journal.Options{RunID: runID, ThreadID: threadID, Pricer: pricer})
	res, runErr := lead.Agent.Run(ctx, agent.Input{
		ThreadID: threadID, RunID: runID, UserID: o.UserID, Journal: j, Sandbox: sb,
		Messages: []message.Message{message.Human(o.Prompt)},
	})
	j.Flush()
	if runErr != nil {
		return nil, runErr
	}
	return &runOutput{Answer: res.Answer, ThreadID: threadID, RunID: runID, TraceID: res.TraceID, Completion: j.CompletionData(), StopReason: res.StopReason}, nil
}

// enabledTools keeps the tools named in agent.tools (all when empty); an unknown name is
// an error naming the key.
func enabledTools(all []tool.Tool, names []string) ([]tool.Tool, error) {
	if len(names) == 0 {
		return all, nil
	}
	byName := map[string]tool.Tool{}
	for _, t := range all {
		byName[t.Spec().Name] = t
	}
	var out []tool.Tool
	var errs []error
	for _, n := range names {
		t, ok := byName[n]
		if !ok {
			errs = append(errs, fmt.Errorf("agent.tools: unknown tool %q", n))
			continue
		}
		out = append(out, t)
	}
	return out, errors.Join(errs...)
}

func printText(w io.Writer, out *runOutput) {
	fmt.Fprintln(w, out.Answer)
	fmt.Fprintln(w)
	c := out.Completion
	fmt.Fprintf(w, "thread %s  run %s  trace %s\n", out.ThreadID, out.RunID, out.TraceID)
	fmt.Fprintf(w, "tokens: total %d (input %d, output %d) in %d model calls\n", c.TotalTokens, c.TotalInputTokens, c.TotalOutputTokens, c.LLMCallCount)
	fmt.Fprintf(w, "by caller: lead_agent %d, subagent %d, middleware %d\n", c.LeadAgentTokens, c.SubagentTokens, c.MiddlewareTokens)
	names := slices.Sorted(maps.Keys(c.TokenUsageByModel))
	for _, n := range names {
		b := c.TokenUsageByModel[n]
		line := fmt.Sprintf("  %s: total %d (input %d, output %d)", n, b.TotalTokens, b.InputTokens, b.OutputTokens)
		if b.CacheReadTokens > 0 {
			line += fmt.Sprintf(", cache_read %d", b.CacheReadTokens)
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "messages: %d\n", c.MessageCount)
}
