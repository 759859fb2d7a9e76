package vendorconfig

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/agentmeter/agentmeter/internal/envconfig"
)

func TestSwitch(t *testing.T) {
	vars := []string{"A_TRACING", "B_TRACING"}
	keys := []string{"public_key", "secret_key"}
	cases := []struct {
		name   string
		env    map[string]string
		yaml   map[string]any
		on     bool
		reason string
	}{
		{"nothing", nil, nil, false, "no enabled: true, no public_key/secret_key in the configuration, and A_TRACING (or B_TRACING) is not set"},
		{"env on", map[string]string{"A_TRACING": "true"}, nil, true, `A_TRACING (or B_TRACING) is "true"`},
		{"fallback variable", map[string]string{"B_TRACING": "1"}, nil, true, `A_TRACING (or B_TRACING) is "1"`},
		{"first variable wins", map[string]string{"A_TRACING": "false", "B_TRACING": "1"}, nil, false, `A_TRACING (or B_TRACING) is "false"`},
		{"a key in the yaml", nil, map[string]any{"secret_key": "s"}, true, "public_key/secret_key set in the configuration"},
		{"env off beats a key", map[string]string{"A_TRACING": "no"}, map[string]any{"public_key": "p"}, false, `A_TRACING (or B_TRACING) is "no"`},
		{"enabled beats env", map[string]string{"A_TRACING": "true"}, map[string]any{"enabled": false}, false, "enabled: false in the configuration"},
		{"enabled beats keys", nil, map[string]any{"enabled": false, "public_key": "p"}, false, "enabled: false in the configuration"},
		{"enabled true alone", nil, map[string]any{"enabled": true}, true, "enabled: true in the configuration"},
	}
	for _, c := range cases {
		s, on := NewSwitch(envconfig.FromMap(c.env), vars, keys)
		conf := confmap.NewFromStringMap(c.yaml)
		if v, ok := c.yaml["enabled"].(bool); ok {
			on = v // what conf.Unmarshal would have set
		}
		s.Settle(conf, &on)
		assert.Equal(t, c.on, on, c.name)
		assert.Equal(t, c.reason, s.Reason(), c.name)
	}
	s, _ := NewSwitch(envconfig.FromMap(nil), []string{"ONLY"}, []string{"api_key"})
	assert.Equal(t, "no enabled: true, no api_key in the configuration, and ONLY is not set", s.Reason())
}

func TestQueueKeepsTheStockMeaning(t *testing.T) {
	bytesQueue := func() configoptional.Optional[exporterhelper.QueueBatchConfig] {
		q := exporterhelper.NewDefaultQueueConfig()
		q.Sizer = exporterhelper.RequestSizerTypeBytes
		return configoptional.Some(q)
	}
	for _, c := range []struct {
		name string
		yaml map[string]any
		want exporterhelper.RequestSizerType
	}{
		{"no queue settings", nil, exporterhelper.RequestSizerTypeBytes},
		{"other queue settings", map[string]any{"sending_queue": map[string]any{"num_consumers": 2}}, exporterhelper.RequestSizerTypeBytes},
		{"queue_size alone counts requests", map[string]any{"sending_queue": map[string]any{"queue_size": 5000}}, exporterhelper.RequestSizerTypeRequests},
		{"queue_size with a sizer", map[string]any{"sending_queue": map[string]any{"queue_size": 5000, "sizer": "items"}}, exporterhelper.RequestSizerTypeBytes},
	} {
		q := bytesQueue()
		Queue(confmap.NewFromStringMap(c.yaml), &q)
		// Queue only decides the sizer of a queue_size without one; a written sizer is
		// applied by the unmarshal itself
		assert.Equal(t, c.want, q.Get().Sizer, c.name)
	}
	none := configoptional.None[exporterhelper.QueueBatchConfig]()
	Queue(confmap.NewFromStringMap(map[string]any{"sending_queue": map[string]any{"queue_size": 1}}), &none)
	assert.False(t, none.HasValue())
}
