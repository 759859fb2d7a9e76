package subagentmerge

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		id   component.ID
		want *Config
	}{
		{component.NewID(Type), createDefaultConfig()},
		{component.NewIDWithName(Type, "custom"), &Config{Mode: ModeHold, LedgerLimitMiB: 16, WaitDuration: 30 * time.Second, SettleTime: 500 * time.Millisecond, NumTraces: 500, LateSpanWindow: time.Minute, ReleaseAfterRoot: 2 * time.Second, CompactAfter: 0}},
		{component.NewIDWithName(Type, "durable"), func() *Config {
			c := createDefaultConfig()
			id := component.MustNewIDWithName("file_storage", "merge")
			c.Storage = &id
			return c
		}()},
		{component.NewIDWithName(Type, "no_late_memory"), &Config{Mode: ModeStream, LedgerLimitMiB: 64, WaitDuration: 5 * time.Minute, SettleTime: 2 * time.Second, NumTraces: 10_000, LateSpanWindow: 0, CompactAfter: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			require.NoError(t, confmap.Validate(cfg))
			assert.Equal(t, tt.want, cfg)
		})
	}
}

func TestConfigStruct(t *testing.T) {
	require.NoError(t, componenttest.CheckConfigStruct(NewFactory().CreateDefaultConfig()))
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		want []string
	}{
		{"zero wait", func(c *Config) { c.WaitDuration = 0 }, []string{"wait_duration must be positive, got 0s"}},
		{"negative wait", func(c *Config) { c.WaitDuration = -time.Second }, []string{"wait_duration must be positive, got -1s"}},
		{"huge wait", func(c *Config) { c.WaitDuration = 25 * time.Hour }, []string{"wait_duration must be at most 24h0m0s, got 25h0m0s"}},
		{"zero traces", func(c *Config) { c.NumTraces = 0 }, []string{"num_traces must be positive, got 0"}},
		{"huge traces", func(c *Config) { c.NumTraces = 20_000_000 }, []string{"num_traces must be at most 10000000, got 20000000"}},
		{"negative window", func(c *Config) { c.LateSpanWindow = -time.Second }, []string{"late_span_window must not be negative, got -1s"}},
		{"negative settle", func(c *Config) { c.SettleTime = -time.Second }, []string{"settle_time must not be negative, got -1s"}},
		{"huge settle", func(c *Config) { c.SettleTime = 25 * time.Hour }, []string{"settle_time must be at most 24h0m0s, got 25h0m0s"}},
		{"unknown mode", func(c *Config) { c.Mode = "batch" }, []string{`mode must be "stream" or "hold", got "batch"`}},
		{"zero ledger", func(c *Config) { c.LedgerLimitMiB = 0 }, []string{"ledger_limit_mib must be between 1 and 65536, got 0"}},
		{"negative compact", func(c *Config) { c.CompactAfter = -time.Millisecond }, []string{"compact_after must not be negative, got -1ms"}},
		{"negative release_after_root", func(c *Config) { c.Mode, c.ReleaseAfterRoot = ModeHold, -time.Second }, []string{"release_after_root must not be negative, got -1s"}},
		{"release_after_root in stream mode", func(c *Config) { c.ReleaseAfterRoot = time.Second }, []string{`release_after_root applies to mode "hold" only`}},
		{"release_after_root past wait", func(c *Config) { c.Mode, c.WaitDuration, c.ReleaseAfterRoot = ModeHold, time.Second, time.Minute },
			[]string{"release_after_root (1m0s) must not exceed wait_duration (1s)"}},
		{"release_after_root without late spans", func(c *Config) { c.Mode, c.ReleaseAfterRoot, c.LateSpanWindow = ModeHold, time.Second, 0 },
			[]string{"release_after_root needs late_span_window above 0"}},
		{"everything at once", func(c *Config) { c.WaitDuration, c.NumTraces, c.LateSpanWindow = 0, -1, -time.Minute },
			[]string{"wait_duration must be positive", "num_traces must be positive", "late_span_window must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := createDefaultConfig()
			tt.mod(c)
			err := c.Validate()
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	assert.NoError(t, createDefaultConfig().Validate())
}
