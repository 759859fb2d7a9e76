package agentusage

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/metadata"
)

// Type is the component type, agentusage.
var Type = metadata.Type

// DefaultEndpoint is loopback: the sidecar serves apps on the same host or pod.
const DefaultEndpoint = "localhost:4319"

// NewFactory returns the receiver factory.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(Type, createDefaultConfig,
		receiver.WithTraces(createTraces, metadata.TracesStability))
}

func createDefaultConfig() component.Config {
	srv := confighttp.NewDefaultServerConfig()
	srv.NetAddr.Endpoint = DefaultEndpoint
	return &Config{
		ServerConfig:   srv,
		PendingTimeout: 5 * time.Minute,
		MaxPending:     10000,
		RetryAfter:     time.Second,
	}
}

func createTraces(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Traces) (receiver.Traces, error) {
	return newReceiver(set, cfg.(*Config), next)
}
