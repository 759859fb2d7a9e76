package subagentmerge

import (
	"testing"

	"github.com/agentmeter/agentmeter/internal/faultsuite/configfuzz"
)

// The processor's config section, loaded as the collector loads it: no panic; an
// accepted config has positive bounds.
func FuzzConfigUnmarshal(f *testing.F) {
	f.Add([]byte("wait_duration: 30s\nnum_traces: 500\nlate_span_window: 1m\ncompact_after: 0s\n"))
	f.Add([]byte("late_span_window: 0s\n"))
	f.Add([]byte("num_traces: -1\nwait_duration: 0s\n"))
	f.Add([]byte("num_traces: 99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, yaml []byte) {
		c, ok := configfuzz.Check(t, NewFactory(), yaml, nil)
		if !ok {
			return
		}
		cfg := c.(*Config)
		if cfg.NumTraces <= 0 || cfg.NumTraces > maxNumTraces || cfg.WaitDuration <= 0 || cfg.WaitDuration > maxWaitDuration {
			t.Fatalf("accepted an out-of-range config: %+v", cfg)
		}
	})
}
