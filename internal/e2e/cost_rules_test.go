//go:build e2e

package e2e

import (
	"testing"
)

// The spend alerts of deploy/prometheus-rules.yaml load (promtool check rules) and fire
// when they should on synthetic cost series (promtool test rules): the app's spend rate
// above budget, one agent's sudden spike against its own day (and not a steady heavy
// agent), calls to an unknown model, and a price table older than 90 days.
func TestCostAlertRulesPromtool(t *testing.T) {
	// 1-minute samples over a day and a half. agent "steady" spends 1.5 USD/min all along
	// (90 USD/h: over the 50 USD/h budget, never a spike); agent "runaway" spends
	// 0.01 USD/min for a day, then 0.5 USD/min (30 USD/h, 50x its usual rate).
	promtoolRules(t, `evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'agentmeter_cost_usd_total{job="app",agent="steady",cost_type="input"}'
        values: '0+1.5x2200'
      - series: 'agentmeter_cost_usd_total{job="app",agent="runaway",cost_type="output"}'
        values: '0+0.01x1500 15+0.5x700'
      - series: 'otelcol_processor_genaicost_calls_unpriced{instance="c",reason="unknown_model",model="llama-3-70b"}'
        values: '0x100 0+2x100'
      - series: 'otelcol_processor_genaicost_price_dataset_age{instance="c",version="0.1.8"}'
        values: '7689600+60x2200'
    alert_rule_test:
      - eval_time: 30m
        alertname: AgentmeterPriceTableStale
        exp_alerts: []
      - eval_time: 1560m
        alertname: AgentmeterPriceTableStale
        exp_alerts:
          - exp_labels: {severity: warning, instance: c, version: "0.1.8"}
            exp_annotations:
              summary: The price table of c is 90d 2h 0m 0s old (dataset 0.1.8)
              description: 'The genaicost price dataset in use was published more than 90 days ago. Set price_refresh in the genaicost processor, or upgrade agentmeter for a newer snapshot (docs/cost.md). Unpriced calls: otelcol_processor_genaicost_calls_unpriced.'

      - eval_time: 60m
        alertname: AgentmeterSpendRateHigh
        exp_alerts:
          - exp_labels: {severity: warning, job: app}
            exp_annotations:
              summary: app spends 90.6 USD/h
              description: Model calls of app have cost more than 50 USD per hour for 10 minutes (15-minute rate of agentmeter_cost_usd_total). See the spend panels by agent and model on the agentmeter dashboard.
      - eval_time: 1440m
        alertname: AgentmeterAgentSpendSpike
        exp_alerts: []
      - eval_time: 1530m
        alertname: AgentmeterAgentSpendSpike
        exp_alerts:
          - exp_labels: {severity: warning, job: app, agent: runaway}
            exp_annotations:
              summary: Agent runaway of app spends 30 USD/h, over 3x its usual rate
              description: The agent's 15-minute spend rate is more than three times its average over the previous day. Look for a run stuck in a loop or a subagent dispatched far more often than usual (agentmeter_tokens_total by agent and model).
      - eval_time: 90m
        alertname: AgentmeterUnpricedModelCalls
        exp_alerts: []
      - eval_time: 150m
        alertname: AgentmeterUnpricedModelCalls
        exp_alerts:
          - exp_labels: {severity: info, instance: c, model: llama-3-70b}
            exp_annotations:
              summary: 'Model llama-3-70b has no price: its calls are not in agentmeter_cost_usd_total'
              description: 60 calls in 30 minutes to a model the genaicost price table does not know. Add a row under the processor's `+"`prices`"+` or load a price file (docs/cost.md).
`)
}
