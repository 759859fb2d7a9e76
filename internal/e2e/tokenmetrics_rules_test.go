//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/agentmeter/agentmeter/genai"
)

// rulesFile writes the groups of deploy/prometheus-rules.yaml (a PrometheusRule) as a
// plain Prometheus rules file and returns its path.
func rulesFile(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "deploy", "prometheus-rules.yaml"))
	require.NoError(t, err)
	var rule struct {
		Kind string         `yaml:"kind"`
		Spec map[string]any `yaml:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &rule))
	require.Equal(t, "PrometheusRule", rule.Kind)
	out, err := yaml.Marshal(rule.Spec)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "rules.yml")
	require.NoError(t, os.WriteFile(p, out, 0o600))
	return p
}

// promtoolRules checks the rules of deploy/prometheus-rules.yaml (promtool check rules)
// and runs the rule unit tests of test, a promtool test file without its rule_files
// line, against them (promtool test rules).
func promtoolRules(t *testing.T, test string) {
	t.Helper()
	rules := rulesFile(t)
	out, err := exec.Command(promtool(t), "check", "rules", rules).CombinedOutput()
	require.NoError(t, err, "%s", out)
	p := filepath.Join(t.TempDir(), "rules_test.yml")
	require.NoError(t, os.WriteFile(p, []byte("rule_files: ["+rules+"]\n"+test), 0o600))
	out, err = exec.Command(promtool(t), "test", "rules", p).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): it comes with Debian's prometheus package (.ci/setup.d/20-prometheus.sh)", err)
	}
	return p
}

// The alert rules in deploy/ are valid (promtool check rules) and do what they say on
// synthetic series (promtool test rules), including the 30-minute one no live test can wait
// for.
func TestTokenMetricsAlertRulesPromtool(t *testing.T) {
	promtoolRules(t, `evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # pod a: spans arrive, model calls counted; pod b: spans arrive, nothing counted
      - series: 'otelcol_receiver_accepted_spans{instance="a"}'
        values: '0+100x90'
      - series: 'otelcol_connector_tokenmetrics_model_calls{instance="a",outcome="counted"}'
        values: '0+10x90'
      - series: 'otelcol_receiver_accepted_spans{instance="b"}'
        values: '0+100x90'
      - series: 'otelcol_connector_tokenmetrics_model_calls{instance="b",outcome="no_usage"}'
        values: '0+10x90'
      - series: 'otelcol_connector_tokenmetrics_overflow_calls{instance="a",metric_set="agentmeter"}'
        values: '0x30 0+5x60'
      - series: 'otelcol_connector_tokenmetrics_model_calls{instance="a",outcome="invalid"}'
        values: '0x90'
    alert_rule_test:
      - eval_time: 20m
        alertname: AgentmeterNoModelCallsCounted
        exp_alerts: []
      - eval_time: 80m
        alertname: AgentmeterNoModelCallsCounted
        exp_alerts:
          - exp_labels: {severity: warning, instance: b}
            exp_annotations:
              summary: Spans arrive at b but no model call is counted
              description: "The collector accepts spans but has counted no model call with usage for 30 minutes: agentmeter_tokens_total is flat. Check that model-call spans carry gen_ai.usage.* (otelcol_connector_tokenmetrics_model_calls by outcome shows no_usage) and a recognised operation."
      - eval_time: 20m
        alertname: AgentmeterTokenMetricsOverflow
        exp_alerts: []
      - eval_time: 60m
        alertname: AgentmeterInvalidUsage
        exp_alerts: []
`)
}

// The alert rules fire in a real Prometheus scraping the shipped collector: past
// max_series (set to 1 here) the overflow alert, on a negative token count the invalid
// usage alert.
func TestTokenMetricsAlertsFire(t *testing.T) {
	ports := setSidecarEnv(t)
	dir := t.TempDir()
	t.Setenv("AGENTMETER_DEMO_TRACES_FILE", filepath.Join(dir, "traces.jsonl"))
	StartWithArgs(t, dir, ports.OTLPHTTP,
		"--config", filepath.Join(RepoRoot(), "otelcol-config.yaml"),
		"--config", filepath.Join(RepoRoot(), "cmd", "demoreport", "overlay.yaml"),
		"--config", "yaml:connectors::tokenmetrics::max_series: 1",
		"--feature-gates=confmap.enableMergeAppendOption")
	prom := StartPrometheus(t, PrometheusOptions{RuleFiles: []string{rulesFile(t)}, Jobs: []ScrapeJob{
		{Name: "agentmeter", Targets: []string{ports.Prometheus}, HonorLabels: true},
		{Name: "otel-internal", Targets: []string{fmt.Sprintf("127.0.0.1:%d", ports.Telemetry)}},
	}})
	prom.WaitForTargetsUp(t, "otel-internal", 1, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	calls := []chatSpan{
		{caller: "lead_agent", model: "gpt-4o", provider: "openai", usage: &genai.Usage{Input: 10, Output: 1}},
		{caller: "lead_agent", model: "o3", provider: "openai", usage: &genai.Usage{Input: 20, Output: 2}},
		{caller: "lead_agent", model: "o3", provider: "openai", usage: &genai.Usage{Input: -5, Output: 2}},
	}
	require.NoError(t, SendOTLPHTTP(ctx, ports.OTLPHTTP, buildTrace(1, calls)))
	// totals stay exact through the overflow; the invalid call is not counted
	prom.WaitForValue(t, `sum(agentmeter_tokens_total{token_type="input"})`, 30, 30*time.Second)
	prom.WaitForValue(t, `sum(agentmeter_tokens_total{otel_metric_overflow="true"})`, 22, 10*time.Second)
	for _, alert := range []string{"AgentmeterTokenMetricsOverflow", "AgentmeterInvalidUsage"} {
		prom.WaitForValue(t, `count(ALERTS{alertname="`+alert+`",alertstate="firing"})`, 1, 30*time.Second)
	}
	s, err := prom.Query(ctx, `ALERTS{alertname="AgentmeterNoModelCallsCounted"}`)
	require.NoError(t, err)
	assert.Empty(t, s, "model calls were counted")
}
