package subagentmerge

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/agentmeter/agentmeter/internal/configtest"
)

func TestLoadConfig(t *testing.T) {
	configtest.Loads(t, NewFactory(), []configtest.Section{
		{ID: component.NewID(Type), Want: createDefaultConfig()},
		{ID: component.NewIDWithName(Type, "custom"), Want: &Config{Mode: ModeHold, Delivery: DeliveryInline, LedgerLimitMiB: 16, WaitDuration: 30 * time.Second, SettleTime: 500 * time.Millisecond, NumTraces: 500, LateSpanWindow: time.Minute, ReleaseAfterRoot: 2 * time.Second, CompactAfter: 0}},
		{ID: component.NewIDWithName(Type, "durable"), Want: func() *Config {
			c := createDefaultConfig()
			id := component.MustNewIDWithName("file_storage", "merge")
			c.Storage = &id
			return c
		}()},
		{ID: component.NewIDWithName(Type, "gather"), Want: func() *Config {
			c := createDefaultConfig()
			c.Mode, c.ReleaseAfterRoot = ModeGather, time.Second
			return c
		}()},
		{ID: component.NewIDWithName(Type, "gather_queued"), Want: func() *Config {
			c := createDefaultConfig()
			c.Mode, c.Delivery = ModeGather, DeliveryQueued
			id := component.MustNewIDWithName("file_storage", "merge")
			c.Storage = &id
			return c
		}()},
		{ID: component.NewIDWithName(Type, "no_late_memory"), Want: &Config{Mode: ModeStream, Delivery: DeliveryInline, LedgerLimitMiB: 64, WaitDuration: 5 * time.Minute, SettleTime: 2 * time.Second, NumTraces: 10_000, LateSpanWindow: 0, CompactAfter: time.Second}},
	})
}

func TestConfigStruct(t *testing.T) {
	require.NoError(t, componenttest.CheckConfigStruct(NewFactory().CreateDefaultConfig()))
}

func TestValidate(t *testing.T) {
	configtest.Refuses(t, createDefaultConfig,
		configtest.BadCase("zero wait", func(c *Config) { c.WaitDuration = 0 },
			"wait_duration must be positive, got 0s"),
		configtest.BadCase("negative wait", func(c *Config) { c.WaitDuration = -time.Second },
			"wait_duration must be positive, got -1s"),
		configtest.BadCase("huge wait", func(c *Config) { c.WaitDuration = 25 * time.Hour },
			"wait_duration must be at most 24h0m0s, got 25h0m0s"),
		configtest.BadCase("zero traces", func(c *Config) { c.NumTraces = 0 },
			"num_traces must be positive, got 0"),
		configtest.BadCase("huge traces", func(c *Config) { c.NumTraces = 20_000_000 },
			"num_traces must be at most 10000000, got 20000000"),
		configtest.BadCase("negative window", func(c *Config) { c.LateSpanWindow = -time.Second },
			"late_span_window must not be negative, got -1s"),
		configtest.BadCase("negative settle", func(c *Config) { c.SettleTime = -time.Second },
			"settle_time must not be negative, got -1s"),
		configtest.BadCase("huge settle", func(c *Config) { c.SettleTime = 25 * time.Hour },
			"settle_time must be at most 24h0m0s, got 25h0m0s"),
		configtest.BadCase("unknown mode", func(c *Config) { c.Mode = "batch" },
			`mode must be "stream", "hold" or "gather", got "batch"`),
		configtest.BadCase("unknown delivery", func(c *Config) { c.Mode, c.Delivery = ModeGather, "async" },
			`delivery must be "inline" or "queued", got "async"`),
		configtest.BadCase("queued delivery in stream mode", func(c *Config) { c.Delivery = DeliveryQueued },
			`delivery "queued" applies to mode "gather" only, got mode "stream"`),
		configtest.BadCase("queued delivery in hold mode", func(c *Config) { c.Mode, c.Delivery = ModeHold, DeliveryQueued },
			`delivery "queued" applies to mode "gather" only, got mode "hold"`),
		configtest.BadCase("zero ledger", func(c *Config) { c.LedgerLimitMiB = 0 },
			"ledger_limit_mib must be between 1 and 65536, got 0"),
		configtest.BadCase("negative compact", func(c *Config) { c.CompactAfter = -time.Millisecond },
			"compact_after must not be negative, got -1ms"),
		configtest.BadCase("negative release_after_root", func(c *Config) { c.Mode, c.ReleaseAfterRoot = ModeHold, -time.Second },
			"release_after_root must not be negative, got -1s"),
		configtest.BadCase("release_after_root in stream mode", func(c *Config) { c.ReleaseAfterRoot = time.Second },
			`release_after_root applies to modes "hold" and "gather" only`),
		configtest.BadCase("release_after_root past wait", func(c *Config) { c.Mode, c.WaitDuration, c.ReleaseAfterRoot = ModeHold, time.Second, time.Minute },
			"release_after_root (1m0s) must not exceed wait_duration (1s)"),
		configtest.BadCase("release_after_root without late spans", func(c *Config) { c.Mode, c.ReleaseAfterRoot, c.LateSpanWindow = ModeHold, time.Second, 0 },
			"release_after_root needs late_span_window above 0"),
		configtest.BadCase("everything at once", func(c *Config) { c.WaitDuration, c.NumTraces, c.LateSpanWindow = 0, -1, -time.Minute },
			"wait_duration must be positive", "num_traces must be positive", "late_span_window must not be negative"),
	)
	assert.NoError(t, createDefaultConfig().Validate())
}
