package vendorconfig

import (
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

// YAML keys of exporterhelper's sending_queue that decide what queue_size counts.
const (
	keyQueueSize  = "sending_queue::queue_size"
	keyQueueSizer = "sending_queue::sizer"
)

// Queue gives a sending_queue written for the stock exporters the meaning users know.
// Both vendor exporters default to a queue sized in bytes (vendorhttp.DefaultQueueConfig);
// a queue_size written without a sizer is counted as exporterhelper counts it by default,
// in requests, so `sending_queue: {queue_size: 5000}` holds 5000 requests, not 5000
// bytes. A queue_size with a sizer is taken as written.
func Queue(conf *confmap.Conf, q *configoptional.Optional[exporterhelper.QueueBatchConfig]) {
	if !q.HasValue() || !conf.IsSet(keyQueueSize) || conf.IsSet(keyQueueSizer) {
		return
	}
	q.Get().Sizer = exporterhelper.NewDefaultQueueConfig().Sizer
}
