package vendorhttp

import (
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

// DefaultQueueBytes bounds the default sending queue: the OTLP-encoded size of the spans
// queued or being sent. In memory a span held as pdata takes several times its encoded
// size (every attribute is its own value), so 8 MiB encoded is some tens of MiB held,
// and the peak stays flat whatever the backlog (bench/exporter_memory.sh: 64 MiB let the
// peak grow from 835 to 1079 MiB between 200k and 1M runs behind a slow vendor). It is
// also faster than 1000 requests of any size: the consumers do not fight over memory.
// Batches larger than half of it are cut before they are queued (NewTraces).
const DefaultQueueBytes = 8 << 20

// DefaultBatchMinSpans and DefaultBatchMaxSpans size the batches the sending queue
// sends when `batch` is on: a batch goes once it has the minimum (or after
// flush_timeout), and never holds more than the maximum. exporterhelper's default (at
// least 8192 spans, no maximum) makes one batch about as large as the whole 8 MiB queue,
// and an exporter converting it holds several times that at once: on the bench-compare
// load the shipped sidecar peaked at about 510 MiB with it and at about 330 MiB with
// these, for no more CPU. Counted in spans, not bytes, because a byte-sized max_size
// drops a span larger than it; the queue's bytes already bound a batch's.
const (
	DefaultBatchMinSpans = 1024
	DefaultBatchMaxSpans = 2048
)

// DefaultMaxIdleConnsPerHost is both exporters' default max_idle_conns_per_host: room to
// keep a connection for each of the sending queue's consumers (10 by default) and more.
// Go's default keeps 2: over HTTP/1.1 (a self-hosted vendor on http://) every request of
// the other consumers then closed its connection and the next dialled a new one (and
// over TLS without HTTP/2 shook hands again); on the bench-compare load that was about
// a tenth of a second of dialling per 100k spans, and as many connections in TIME_WAIT.
// HTTP/2 multiplexes the requests over one connection and does not use it.
const DefaultMaxIdleConnsPerHost = 16

// KeepIdleConnections gives c the default max_idle_conns_per_host
// (DefaultMaxIdleConnsPerHost).
//
// It sets the keepalive section, the form every collector release has (the flat fields
// are deprecated, then removed). A release that still has the flat fields gives
// ClientConfig an Unmarshal that folds the section into them and leaves the section
// unset; that is done here at once, so a default config already has the form an
// unmarshaled one has, and a user's keys (flat or `keepalive:`) override it as they would
// any default.
func KeepIdleConnections(c *confighttp.ClientConfig) {
	ka := confighttp.NewDefaultKeepaliveClientConfig()
	if cur := c.Keepalive.Get(); cur != nil {
		ka = *cur
	}
	ka.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	c.Keepalive = configoptional.Some(ka)
	if u, ok := any(c).(confmap.Unmarshaler); ok {
		// folding into the struct's own fields cannot fail on an empty configuration
		_ = u.Unmarshal(confmap.New())
	}
}

// DefaultQueueConfig is both exporters' default sending queue: exporterhelper's default
// (in memory, 10 consumers) sized in bytes instead of 1000 requests of any size, so memory
// stays flat whatever the backlog. A full queue is back-pressure, never a drop: the caller
// waits for room (block_on_overflow), at most MaxQueueWait or until its own deadline,
// then gets a retryable error, which the receiver answers as 503 / Unavailable so the
// sender retries. The short wait absorbs a burst without refusing it, and unlike an
// immediate refusal does not make a batch processor in front drop every batch of a
// burst (it logs "Sender failed" and discards it). Batching is off unless configured
// (`batch: {}` turns it on), as for the stock exporters; its sizes default to
// DefaultBatchMinSpans and DefaultBatchMaxSpans.
func DefaultQueueConfig() exporterhelper.QueueBatchConfig {
	q := exporterhelper.NewDefaultQueueConfig()
	q.Sizer = exporterhelper.RequestSizerTypeBytes
	q.QueueSize = DefaultQueueBytes
	q.BlockOnOverflow = true
	on := q.Batch.HasValue() // exporterhelper's feature gate turns batching on by default
	b := *q.Batch.GetOrInsertDefault()
	b.Sizer, b.MinSize, b.MaxSize = exporterhelper.RequestSizerTypeItems, DefaultBatchMinSpans, DefaultBatchMaxSpans
	if on {
		q.Batch = configoptional.Some(b)
	} else {
		q.Batch = configoptional.Default(b)
	}
	return q
}
