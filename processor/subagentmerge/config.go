package subagentmerge

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
)

// Limits that keep a typo from configuring a processor that can never work.
const (
	maxWaitDuration = 24 * time.Hour
	maxNumTraces    = 10_000_000
	maxLedgerMiB    = 1 << 16
)

// Modes: how spans leave the processor.
const (
	// ModeStream passes every span on within the call that brought it, merged with what
	// the trace's ledger knows, and re-emits a dispatching span when its merged usage
	// changes later (ledger.go).
	ModeStream = "stream"
	// ModeHold buffers a trace's spans until the trace is complete (or settled, idle,
	// pushed out by capacity), then merges and releases them together.
	ModeHold = "hold"
	// ModeGather buffers a trace's spans like hold mode but merges nothing: it is for
	// spans a stream-mode merge before it already merged, for a sink that needs whole
	// traces and takes corrections (LangSmith, for spans without their placement). Each
	// span goes on once, in its newest version, and later re-emissions as they come
	// (gather.go).
	ModeGather = "gather"
)

// Deliveries: how a gather-mode instance hands on what it releases.
const (
	// DeliveryInline passes released traces to the next consumer in the call (the request
	// or the sweep) that released them; what it refuses waits in the unsent queue.
	DeliveryInline = "inline"
	// DeliveryQueued sends them from the processor's own queue, in order, by a goroutine
	// of its own: a request returns once what it brought is stored, and a released trace
	// stays in storage, not decoded, until the next consumer took it. It is for an
	// exporter without a sending queue, which the processor's storage replaces: the
	// spans are stored once instead of twice (hold_deliver.go).
	DeliveryQueued = "queued"
)

// Config is the subagentmerge processor's configuration.
type Config struct {
	// Mode is "stream" (the default: spans go on at once, dispatchers are re-emitted
	// "corrected" as their subagents' usage arrives), "hold" (spans wait until their
	// trace is complete: for sinks that keep only the first version of a span) or
	// "gather" (hold mode's wait without its merge, after a stream-mode merge).
	Mode string `mapstructure:"mode"`

	// LedgerLimitMiB bounds the memory of the ledgers (stream mode) and of the records
	// of released traces (hold mode): past it, ledgers end (those of complete traces
	// first, each kind least recently extended first; none a request still waits on
	// at the next consumer), or the records kept earliest (and not corrected since) go.
	// Default: 64.
	LedgerLimitMiB int `mapstructure:"ledger_limit_mib"`

	// WaitDuration is, in stream mode, how long a trace's ledger is kept after its last
	// new span (spans arriving later start a new ledger). In hold mode it is how long a
	// trace may go without a new span before it is released incomplete. A complete trace (its root has arrived and every span's parent is
	// present) is released at once, so this only bounds how long an unfinished run is
	// held; it must exceed the longest quiet gap inside one run (a slow model call or
	// tool), or the run is split and its later spans pass through as late.
	// Default: 5m.
	WaitDuration time.Duration `mapstructure:"wait_duration"`

	// SettleTime is, in stream mode, the shortest time between two re-emissions of one
	// dispatching span: changes within it are coalesced into one (a trace that becomes
	// complete sends its last one at once). In hold mode it is how long a trace is held after its root arrived when nothing it
	// names is missing but it does not say that every agent run has ended: its model
	// calls announce nothing (no tool-call ids, output messages or finish reasons), or an
	// agent run in it has no final answer yet. A trace that says everything is released
	// at once. 0 releases such traces at once too (their root and every parent present is
	// enough).
	// A settle_time above wait_duration acts as wait_duration.
	// Default: 2s.
	SettleTime time.Duration `mapstructure:"settle_time"`

	// NumTraces is the most traces held at once (hold mode), exactly (a trace being
	// added by one request aside), or with a ledger (stream mode). When it is exceeded,
	// the least recently extended traces of the whole buffer are released early, never
	// dropped; ledgers end as with LedgerLimitMiB.
	// Default: 10000.
	NumTraces int `mapstructure:"num_traces"`

	// ReleaseAfterRoot (hold and gather mode) releases a trace this long after its root arrived even
	// when spans it names are still missing: a parent, an execute_tool span, a subagent's
	// run. A root ends after everything under it in its process, so what is still missing
	// then is mostly never traced (a `task` tool the instrumentation does not record);
	// what does come later, a subagent in another process, is merged as a late span and
	// its dispatcher re-emitted `corrected` within late_span_window. For sinks that take
	// corrections (LangSmith by PATCH). In gather mode what comes later goes on at once,
	// merged by the stream merge before it. 0: such a trace is held until it is complete or
	// wait_duration passes. It must not exceed wait_duration, and it needs
	// late_span_window.
	// Default: 0.
	ReleaseAfterRoot time.Duration `mapstructure:"release_after_root"`

	// LateSpanWindow (hold and gather mode) is how long the span ids of a released trace
	// are remembered, so a span arriving later is passed on marked late (gather mode: as
	// it is) and an exact duplicate (a client retry) is dropped; in gather mode a newer
	// version of a span passed on goes on, an older one is dropped. About num_traces released traces are remembered so; past that,
	// up to 8 × num_traces more by trace id alone, whose late spans (and duplicates) are
	// still passed on at once, marked late. 0 turns the memory off: late spans are then
	// buffered as a new trace and duplicates after release are passed on again.
	// Default: 2m.
	LateSpanWindow time.Duration `mapstructure:"late_span_window"`

	// CompactAfter is, in hold mode, how long spans stay in the collector's in-memory
	// form before they are encoded as protobuf, several times smaller. Runs that
	// complete within it (most short ones) are never encoded; long runs, which hold most
	// of the buffer, are held compact. 0 encodes every buffered span on arrival (gather
	// mode always does: it may not keep the batch's spans). In stream mode it is how long a
	// ledger stays as it is after its last new span or
	// re-emission before the sweeper compresses it whole (a third of its bytes on agent
	// runs); the next call that needs it decompresses it, and each such thaw doubles how
	// long that ledger stays as it is (up to 64 times compact_after), so a long run whose
	// spans come seconds apart is not compressed again between each two.
	// Default: 1s.
	CompactAfter time.Duration `mapstructure:"compact_after"`

	// Storage names a storage extension (file_storage). In stream mode the ledgers are
	// kept there (the spans themselves are the next consumers' to keep: persistent
	// sending queues), so a restart goes on converging. In hold and gather mode what the buffer
	// holds is also kept on disk, written before a request is acknowledged, so a
	// restart after a crash buffers it again. Unset: memory only. With it, every
	// buffered group of spans is encoded on arrival (compact_after does not apply).
	Storage *component.ID `mapstructure:"storage"`
	// Delivery (gather mode) is "inline" (the default: released traces go to the next
	// consumer in the call that released them, which should queue them itself, e.g. an
	// exporter's persistent sending queue) or "queued": the processor sends them itself,
	// from its storage, by a goroutine of its own, in order, retrying what is refused
	// until it is taken; a request is answered once its spans are stored. For an exporter
	// with its sending queue off (retry_on_failure on), whose queue this replaces: the
	// spans are then encoded, stored and decoded once instead of twice. What waits to be
	// sent is bounded (32 MiB of encoded spans); past it new requests are refused,
	// retryably, until it drains.
	Delivery string `mapstructure:"delivery"`
}

func createDefaultConfig() *Config {
	return &Config{
		Mode:           ModeStream,
		Delivery:       DeliveryInline,
		LedgerLimitMiB: 64,
		WaitDuration:   5 * time.Minute,
		SettleTime:     2 * time.Second,
		NumTraces:      10_000,
		LateSpanWindow: 2 * time.Minute,
		CompactAfter:   time.Second,
	}
}

// Validate reports every problem at once, each naming its YAML key.
func (c *Config) Validate() error {
	var errs []error
	switch c.Mode {
	case ModeStream, ModeHold, ModeGather:
	default:
		errs = append(errs, fmt.Errorf("mode must be %q, %q or %q, got %q", ModeStream, ModeHold, ModeGather, c.Mode))
	}
	if c.LedgerLimitMiB <= 0 || c.LedgerLimitMiB > maxLedgerMiB {
		errs = append(errs, fmt.Errorf("ledger_limit_mib must be between 1 and %d, got %d", maxLedgerMiB, c.LedgerLimitMiB))
	}
	if c.WaitDuration <= 0 {
		errs = append(errs, fmt.Errorf("wait_duration must be positive, got %s", c.WaitDuration))
	} else if c.WaitDuration > maxWaitDuration {
		errs = append(errs, fmt.Errorf("wait_duration must be at most %s, got %s", maxWaitDuration, c.WaitDuration))
	}
	if c.SettleTime < 0 {
		errs = append(errs, fmt.Errorf("settle_time must not be negative, got %s", c.SettleTime))
	} else if c.SettleTime > maxWaitDuration {
		errs = append(errs, fmt.Errorf("settle_time must be at most %s, got %s", maxWaitDuration, c.SettleTime))
	}
	if c.NumTraces <= 0 {
		errs = append(errs, fmt.Errorf("num_traces must be positive, got %d", c.NumTraces))
	} else if c.NumTraces > maxNumTraces {
		errs = append(errs, fmt.Errorf("num_traces must be at most %d, got %d", maxNumTraces, c.NumTraces))
	}
	if c.LateSpanWindow < 0 {
		errs = append(errs, fmt.Errorf("late_span_window must not be negative, got %s", c.LateSpanWindow))
	} else if c.LateSpanWindow > maxWaitDuration {
		errs = append(errs, fmt.Errorf("late_span_window must be at most %s, got %s", maxWaitDuration, c.LateSpanWindow))
	}
	if c.ReleaseAfterRoot < 0 {
		errs = append(errs, fmt.Errorf("release_after_root must not be negative, got %s", c.ReleaseAfterRoot))
	} else if c.ReleaseAfterRoot > 0 {
		if c.Mode == ModeStream {
			errs = append(errs, fmt.Errorf("release_after_root applies to modes %q and %q only (stream mode holds nothing)", ModeHold, ModeGather))
		}
		if c.WaitDuration > 0 && c.ReleaseAfterRoot > c.WaitDuration {
			errs = append(errs, fmt.Errorf("release_after_root (%s) must not exceed wait_duration (%s)", c.ReleaseAfterRoot, c.WaitDuration))
		}
		if c.LateSpanWindow == 0 {
			errs = append(errs, errors.New("release_after_root needs late_span_window above 0: spans arriving after the early release would not be merged"))
		}
	}
	switch c.Delivery {
	case DeliveryInline:
	case DeliveryQueued:
		if c.Mode != ModeGather {
			errs = append(errs, fmt.Errorf("delivery %q applies to mode %q only, got mode %q", DeliveryQueued, ModeGather, c.Mode))
		}
	default:
		errs = append(errs, fmt.Errorf("delivery must be %q or %q, got %q", DeliveryInline, DeliveryQueued, c.Delivery))
	}
	if c.CompactAfter < 0 {
		errs = append(errs, fmt.Errorf("compact_after must not be negative, got %s", c.CompactAfter))
	} else if c.CompactAfter > maxWaitDuration {
		errs = append(errs, fmt.Errorf("compact_after must be at most %s, got %s", maxWaitDuration, c.CompactAfter))
	}
	return errors.Join(errs...)
}
