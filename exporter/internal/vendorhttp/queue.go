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
// (in memory, 10 consumers) sized in bytes instead of 1000 requests of any size, so memory
// stays flat whatever the backlog. A full queue is back-pressure, never a drop: the caller
// waits for room (block_on_overflow), and when its deadline ends first (an OTLP request's)
// it gets a retryable error, which the receiver answers as 503 / Unavailable so the sender
// retries. Refusing at once instead would make a batch processor in front drop the batch
// (it logs "Sender failed" and discards it).
func DefaultQueueConfig() exporterhelper.QueueBatchConfig {
	q := exporterhelper.NewDefaultQueueConfig()
	q.Sizer = exporterhelper.RequestSizerTypeBytes
	q.QueueSize = DefaultQueueBytes
	q.BlockOnOverflow = true
	return q
}
