package vendorhttp

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Part is the final outcome for items [Lo, Hi) of one push: delivered (nil), permanent
// or retryable.
type Part struct {
	Lo, Hi int
	Err    error
}

// Splitter sends items by index range and halves a range the server refused as too
// large (ErrTooLarge), down to single items.
type Splitter struct {
	// Send sends items [lo, hi) in one request.
	Send func(ctx context.Context, lo, hi int) error
	// OnSplit, when set, runs before a refused range is halved (logging, lowering a limit).
	OnSplit func(lo, hi int, err error)
	// Alone makes the permanent error for item i, too large on its own.
	Alone func(i int, err error) error
}

// Run sends [lo, hi) and appends every request's outcome to out. Halves are sent one
// after the other, so a retry later sends only the parts whose request failed retryably
// and never a part that was delivered.
func (s Splitter) Run(ctx context.Context, lo, hi int, out []Part) []Part {
	err := s.Send(ctx, lo, hi)
	if !errors.Is(err, ErrTooLarge) {
		return append(out, Part{lo, hi, err})
	}
	if hi-lo <= 1 {
		return append(out, Part{lo, hi, consumererror.NewPermanent(s.Alone(lo, err))})
	}
	if s.OnSplit != nil {
		s.OnSplit(lo, hi, err)
	}
	mid := lo + (hi-lo)/2
	out = s.Run(ctx, lo, mid, out)
	return s.Run(ctx, mid, hi, out)
}

// Fold turns the parts of one push of n items into the error exporterhelper acts on:
//   - nil when every part was delivered;
//   - the first retryable error as it is (it may carry a Retry-After throttle) when no
//     item was delivered or dropped: the whole request is retried;
//   - consumererror.NewTraces with just the spans of the retryable parts (retryData
//     builds them) when some parts went through or were dropped, so a retry never sends
//     delivered data again;
//   - a permanent error joining the permanent ones when nothing is left to retry.
//
// dropped, when set, is told about each permanent part (its data is not retried).
func Fold(parts []Part, n int, retryData func(retry []Part) ptrace.Traces, dropped func(Part)) error {
	return FoldWith(parts, n, func(err error, retry []Part) error {
		return consumererror.NewTraces(err, retryData(retry))
	}, dropped)
}

// FoldWith is Fold for an exporter that queues its own requests: partial makes the error
// that carries what is left to retry (the retryable parts), from the first retryable
// error.
func FoldWith(parts []Part, n int, partial func(err error, retry []Part) error, dropped func(Part)) error {
	var retry []Part
	var permanent []error
	covered := 0
	for _, p := range parts {
		switch {
		case p.Err == nil:
		case consumererror.IsPermanent(p.Err):
			permanent = append(permanent, p.Err)
			if dropped != nil {
				dropped(p)
			}
		default:
			retry = append(retry, p)
			covered += p.Hi - p.Lo
		}
	}
	switch {
	case len(retry) > 0 && covered == n:
		return retry[0].Err
	case len(retry) > 0:
		return partial(retry[0].Err, retry)
	case len(permanent) > 0:
		return consumererror.NewPermanent(errors.Join(permanent...))
	}
	return nil
}
