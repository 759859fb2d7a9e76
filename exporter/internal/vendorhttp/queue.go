package vendorhttp

import (
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

// DefaultQueueBytes bounds the default sending queue: the OTLP-encoded size of the spans
// queued or being sent. In memory a span takes several times its encoded size (pdata
// keeps every attribute as its own value), so 8 MiB encoded is some tens of MiB held,
// and the peak stays flat whatever the backlog (bench/exporter_memory.sh: 64 MiB let the
// peak grow from 835 to 1079 MiB between 200k and 1M runs behind a slow vendor). It is
// also faster than 1000 requests of any size: the consumers do not fight over memory.
// Batches larger than half of it are cut before they are queued (NewTraces).
const DefaultQueueBytes = 8 << 20

// DefaultQueueConfig is both exporters' default sending queue: exporterhelper's default
// (in memory, 10 consumers) sized in bytes instead of 1000 requests of any size, so memory
// stays flat whatever the backlog. A full queue is back-pressure, never a drop: the caller
// waits for room (block_on_overflow), at most MaxQueueWait or until its own deadline,
// then gets a retryable error, which the receiver answers as 503 / Unavailable so the
// sender retries. The short wait absorbs a burst without refusing it, and unlike an
// immediate refusal does not make a batch processor in front drop every batch of a
// burst (it logs "Sender failed" and discards it).
func DefaultQueueConfig() exporterhelper.QueueBatchConfig {
	q := exporterhelper.NewDefaultQueueConfig()
	q.Sizer = exporterhelper.RequestSizerTypeBytes
	q.QueueSize = DefaultQueueBytes
	q.BlockOnOverflow = true
	return q
}
