package vendorhttp

import (
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

// DefaultQueueBytes bounds the default sending queue: the OTLP-encoded size of the spans
// queued or being sent. In memory a span takes a few times its encoded size, so the
// queue holds about 150–250 MiB at most, whatever the backlog; a request larger than the
// whole queue cannot be queued (the OTLP receiver's default body limit is 20 MiB).
const DefaultQueueBytes = 64 << 20

// DefaultQueueConfig is both exporters' default sending queue: exporterhelper's default
// (in memory, 10 consumers) sized in bytes instead of 1000 requests of any size, and not
// blocking, so a full queue refuses new data with a retryable error (the OTLP receiver
// answers 503 / Unavailable and the sender retries) instead of growing or dropping.
func DefaultQueueConfig() exporterhelper.QueueBatchConfig {
	q := exporterhelper.NewDefaultQueueConfig()
	q.Sizer = exporterhelper.RequestSizerTypeBytes
	q.QueueSize = DefaultQueueBytes
	q.BlockOnOverflow = false
	return q
}
