package store

import (
	"encoding/json"
	"testing"

	"github.com/agentmeter/agentmeter/runtime/journal"
)

func TestAggregateCountsAMultiModelRunOncePerModel(t *testing.T) {
	u := Aggregate([]AggregateRow{
		{TotalTokens: 30, LeadAgentTokens: 30, ModelName: "ignored-when-json", ByModel: map[string]journal.ModelUsage{"a": {TotalTokens: 10}, "b": {TotalTokens: 20}}},
		{TotalTokens: 5, LeadAgentTokens: 5, ByModel: map[string]journal.ModelUsage{"a": {}}}, // missing total counts 0
		{TotalTokens: 7, LeadAgentTokens: 7}, // legacy without model name
	})
	b, _ := json.Marshal(u)
	want := `{"total_tokens":42,"total_input_tokens":0,"total_output_tokens":0,"total_runs":3,"by_model":{"a":{"tokens":10,"runs":2},"b":{"tokens":20,"runs":1},"unknown":{"tokens":7,"runs":1}},"by_caller":{"lead_agent":42,"subagent":0,"middleware":0}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestStatus(t *testing.T) {
	for _, s := range []Status{StatusPending, StatusRunning} {
		if !s.Valid() || s.Final() {
			t.Errorf("%s", s)
		}
	}
	for _, s := range []Status{StatusSuccess, StatusError, StatusTimeout, StatusInterrupted} {
		if !s.Valid() || !s.Final() {
			t.Errorf("%s", s)
		}
	}
	if Status("done").Valid() {
		t.Error("done is valid")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := NewConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	err := (&Config{Driver: "postgres"}).Validate()
	if err == nil || err.Error() != "dsn (or dsn_env) is required for driver postgres" {
		t.Fatalf("postgres without dsn: %v", err)
	}
	err = (&Config{Driver: "mysql", DSN: "x", DSNEnv: "Y"}).Validate()
	if err == nil || err.Error() != "driver \"mysql\" must be sqlite or postgres\nset dsn or dsn_env, not both" {
		t.Fatalf("bad config: %v", err)
	}
}
