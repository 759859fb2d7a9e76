package vendorhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmeter/agentmeter/internal/spaniter"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testVendor = Vendor{
	Name:           "Vendor",
	CredentialHint: func(status int) string { return "check api_key" },
	Delivered:      func(status int) bool { return status == http.StatusConflict },
}

func answer(status int, body string, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

// Both exporters retry exactly these statuses (the SDKs' set).
func TestRetryable(t *testing.T) {
	for _, c := range []int{408, 425, 429, 500, 502, 503, 504, 599} {
		assert.True(t, Retryable(c), c)
	}
	for _, c := range []int{200, 400, 401, 403, 404, 409, 413, 422} {
		assert.False(t, Retryable(c), c)
	}
}

func TestClassify(t *testing.T) {
	assert.NoError(t, testVendor.Classify(answer(202, ""), "POST /x"))
	assert.NoError(t, testVendor.Classify(answer(409, `{"detail":"exists"}`), "POST /x"), "Delivered")
	assert.Error(t, Vendor{Name: "other"}.Classify(answer(409, ""), ""), "409 is only delivered where the vendor says so")

	err := testVendor.Classify(answer(413, "too big"), "POST /x")
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.True(t, consumererror.IsPermanent(err))

	err = testVendor.Classify(answer(401, `{"message":"bad key"}`), "POST /x")
	assert.ErrorIs(t, err, ErrCredentials)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Equal(t, "Vendor rejected the credentials (HTTP 401 on POST /x): bad key; check api_key", errors.Unwrap(err).Error())

	err = testVendor.Classify(answer(503, "busy", "Retry-After", "3"), "POST /x")
	assert.False(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "Throttle (3s)")
	assert.Contains(t, err.Error(), "Vendor: POST /x: HTTP 503: busy")

	err = testVendor.Classify(answer(425, ""), "")
	assert.False(t, consumererror.IsPermanent(err))
	assert.Equal(t, "Vendor: HTTP 425: Too Early", err.Error())

	err = testVendor.Classify(answer(422, `{"detail":{"loc":["post",0]}}`), "POST /x")
	assert.True(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), `HTTP 422: {"loc":["post",0]}`)
}

func TestServerMessage(t *testing.T) {
	for body, want := range map[string]string{
		`{"detail":"d","message":"m","error":"e"}`: "d",
		`{"message":"m","error":"e"}`:              "m",
		`{"error":"e"}`:                            "e",
		`{"error":{"code":7}}`:                     `{"code":7}`,
		`{"message":""}`:                           `{"message":""}`,
		`  plain text  `:                           "plain text",
		``:                                         "Bad Gateway",
	} {
		assert.Equal(t, want, ServerMessage(answer(502, body)), body)
	}
	long := ServerMessage(answer(500, strings.Repeat("x", 5000)))
	assert.Len(t, long, MaxServerMessage+len("…"))
	// a three-byte character across the bound is left out whole, not cut in two
	wide := ServerMessage(answer(500, "x"+strings.Repeat("€", 400)))
	assert.True(t, utf8.ValidString(wide), wide)
	assert.Equal(t, "x"+strings.Repeat("€", (MaxServerMessage-1)/3)+"…", wide)
}

// A network error names what failed, never the URL (an endpoint may carry a secret).
func TestNetworkErrorHidesTheURL(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "http://user:hunter2@127.0.0.1:1/path", http.NoBody)
	require.NoError(t, err)
	_, err = http.DefaultClient.Do(req)
	require.Error(t, err)
	got := testVendor.NetworkError(err, "POST /runs")
	assert.NotContains(t, got.Error(), "hunter2")
	assert.NotContains(t, got.Error(), "127.0.0.1:1/path")
	assert.Contains(t, got.Error(), "Vendor: POST /runs: ")
	assert.False(t, consumererror.IsPermanent(got))
}

func TestValidateEndpoint(t *testing.T) {
	for endpoint, want := range map[string]string{
		"":                         "endpoint must be set",
		"ftp//nowhere":             "endpoint must be an http or https URL",
		"ftp://x":                  `not scheme "ftp"`,
		"https://u:pw@h.example":   "endpoint must not carry credentials",
		"https://h.example/?a=b":   "without query or fragment",
		"https://":                 "endpoint must name a host",
		"://bad":                   "endpoint must be a valid URL",
		"https://h.example/api/v1": "",
	} {
		err := ValidateEndpoint(endpoint)
		if want == "" {
			assert.NoError(t, err)
			continue
		}
		if assert.Error(t, err, endpoint) {
			assert.Contains(t, err.Error(), want)
			if endpoint != "" {
				assert.NotContains(t, err.Error(), endpoint, "never echoes the endpoint")
			}
		}
	}
}

// The splitter halves only what the server refused as too large, and Fold retries only
// the parts that failed retryably.
func TestSplitterAndFold(t *testing.T) {
	// items 0..7; a request over 3 items is too large; items 6 and 7 fail retryably,
	// item 5 is refused for good
	var sent [][2]int
	s := Splitter{
		Send: func(_ context.Context, lo, hi int) error {
			sent = append(sent, [2]int{lo, hi})
			switch {
			case hi-lo > 3:
				return consumererror.NewPermanent(ErrTooLarge)
			case lo == 6:
				return errors.New("HTTP 503")
			case lo == 4 && hi == 6:
				return consumererror.NewPermanent(errors.New("HTTP 422"))
			}
			return nil
		},
		Alone: func(i int, err error) error { return err },
	}
	parts := s.Run(context.Background(), 0, 8, nil)
	assert.Equal(t, [][2]int{{0, 8}, {0, 4}, {0, 2}, {2, 4}, {4, 8}, {4, 6}, {6, 8}}, sent)
	require.Len(t, parts, 4)

	var dropped []Part
	var retried []Part
	err := Fold(parts, 8, func(r []Part) ptrace.Traces { retried = r; return ptrace.NewTraces() }, func(p Part) { dropped = append(dropped, p) })
	var te consumererror.Traces
	require.ErrorAs(t, err, &te, "only the failed part is handed back")
	assert.Equal(t, []Part{{6, 8, parts[3].Err}}, retried)
	require.Len(t, dropped, 1)
	assert.Equal(t, 4, dropped[0].Lo)

	// nothing delivered: the error as it is, so a throttle survives
	throttle := exporterhelper.NewThrottleRetry(errors.New("429"), time.Second)
	assert.Equal(t, throttle, Fold([]Part{{0, 8, throttle}}, 8, nil, nil))
	// all delivered
	assert.NoError(t, Fold([]Part{{0, 4, nil}, {4, 8, nil}}, 8, nil, nil))
	// only permanent failures
	err = Fold([]Part{{0, 4, nil}, {4, 8, consumererror.NewPermanent(errors.New("x"))}}, 8, nil, nil)
	assert.True(t, consumererror.IsPermanent(err))

	// a single item too large is permanent and named by Alone
	s = Splitter{
		Send:  func(context.Context, int, int) error { return consumererror.NewPermanent(ErrTooLarge) },
		Alone: func(i int, err error) error { return errors.New("item alone") },
	}
	parts = s.Run(context.Background(), 3, 4, nil)
	require.Len(t, parts, 1)
	assert.True(t, consumererror.IsPermanent(parts[0].Err))
	assert.Contains(t, parts[0].Err.Error(), "item alone")
}

func TestSubsetKeepsResourceAndScope(t *testing.T) {
	td := ptrace.NewTraces()
	for r := 0; r < 2; r++ {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutInt("r", int64(r))
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("scope")
		for k := 0; k < 3; k++ {
			ss.Spans().AppendEmpty().SetName(string(rune('a' + 3*r + k)))
		}
	}
	refs := SpanRefs(td)
	require.Len(t, refs, 6)
	sub := Subset(td, refs[2:5])
	require.Equal(t, 2, sub.ResourceSpans().Len())
	assert.Equal(t, 3, sub.SpanCount())
	var names []string
	for i := 0; i < sub.ResourceSpans().Len(); i++ {
		rs := sub.ResourceSpans().At(i)
		v, _ := rs.Resource().Attributes().Get("r")
		assert.EqualValues(t, i, v.Int())
		ss := rs.ScopeSpans().At(0)
		assert.Equal(t, "scope", ss.Scope().Name())
		for k := 0; k < ss.Spans().Len(); k++ {
			names = append(names, ss.Spans().At(k).Name())
		}
	}
	assert.Equal(t, []string{"c", "d", "e"}, names)
}

// The default queue is bounded in bytes, and a full queue is back-pressure: the caller
// waits for room, and gets a retryable error (never a drop) when its deadline ends first.
func TestDefaultQueueIsBackPressure(t *testing.T) {
	q := DefaultQueueConfig()
	assert.Equal(t, exporterhelper.RequestSizerTypeBytes, q.Sizer)
	assert.EqualValues(t, DefaultQueueBytes, q.QueueSize)
	assert.True(t, q.BlockOnOverflow)
	require.NoError(t, q.Validate())

	q.QueueSize = 4096 // room for one batch below
	q.NumConsumers = 1
	b := newBlockedPush()
	set := exportertest.NewNopSettings(component.MustNewType("vendor"))
	exp, err := exporterhelper.NewTraces(context.Background(), set, &struct{}{}, b.push, exporterhelper.WithQueue(configoptional.Some(q)))
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	batch := func() ptrace.Traces { return spansNamed(40, 50) }
	release, started, pushed := b.release, b.started, &b.pushed
	require.NoError(t, exp.ConsumeTraces(context.Background(), batch()))
	<-started // the one consumer holds the first batch, which still counts against the queue

	// a caller with a deadline: refused when it ends, retryably
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	refused := exp.ConsumeTraces(ctx, batch())
	cancel()
	require.Error(t, refused)
	assert.ErrorIs(t, refused, context.DeadlineExceeded)
	assert.False(t, consumererror.IsPermanent(refused), "back-pressure: the sender retries")

	// a caller without one (a batch processor): waits for room, then is accepted
	done := make(chan error, 1)
	go func() { done <- exp.ConsumeTraces(context.Background(), batch()) }()
	select {
	case err := <-done:
		t.Fatalf("accepted into a full queue: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-done)
	require.NoError(t, exp.Shutdown(context.Background()))
	assert.EqualValues(t, 2, pushed.Load(), "nothing dropped")
}

func TestNewDisabledLogsOnceAndDrops(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	set := exportertest.NewNopSettings(component.MustNewType("vendor"))
	set.Logger = zap.New(core)
	exp, err := NewDisabled(context.Background(), set, &struct{}{}, "Vendor exporter is disabled", "no key")
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	td.MarkReadOnly()
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	require.NoError(t, exp.Shutdown(context.Background()))
	entries := logs.FilterMessage("Vendor exporter is disabled").All()
	require.Len(t, entries, 1)
	assert.Equal(t, "no key", entries[0].ContextMap()["reason"])
	assert.False(t, exp.Capabilities().MutatesData)
}

// A batch larger than a byte-sized blocking queue is cut into pieces that fit, instead of
// waiting forever for room that cannot come; every span is pushed once.
func TestNewTracesCutsBatchesLargerThanTheQueue(t *testing.T) {
	q := DefaultQueueConfig()
	q.QueueSize = 4096
	q.NumConsumers = 2
	var spans atomic.Int64
	var pushes atomic.Int32
	push := func(_ context.Context, td ptrace.Traces) error {
		spans.Add(int64(td.SpanCount()))
		pushes.Add(1)
		return nil
	}
	set := exportertest.NewNopSettings(component.MustNewType("vendor"))
	exp, err := NewTraces(context.Background(), set, &struct{}{}, Sender{Push: push}, configretry.NewDefaultBackOffConfig(), configoptional.Some(q))
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for i := 0; i < 300; i++ { // about 17 KB encoded, four times the queue
		ss.Spans().AppendEmpty().SetName(strings.Repeat("s", 50))
	}
	td.MarkReadOnly()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, exp.ConsumeTraces(ctx, td))
	require.NoError(t, exp.Shutdown(context.Background()))
	assert.EqualValues(t, 300, spans.Load())
	assert.Greater(t, pushes.Load(), int32(4))
	assert.False(t, exp.Capabilities().MutatesData)
}

// Through NewTraces a full blocking queue refuses a caller without a deadline after
// MaxQueueWait, retryably, instead of holding it until room comes; a caller with a nearer
// deadline is refused at that deadline. Nothing accepted is dropped.
func TestFullQueueAnswersWithinTheBoundedWait(t *testing.T) {
	q := DefaultQueueConfig()
	q.QueueSize = 4096
	q.NumConsumers = 1
	b := newBlockedPush()
	set := exportertest.NewNopSettings(component.MustNewType("vendor"))
	exp, err := NewTraces(context.Background(), set, &struct{}{}, Sender{Push: b.push}, configretry.NewDefaultBackOffConfig(), configoptional.Some(q))
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	batch := func() ptrace.Traces { return spansNamed(30, 50) }
	release, started, pushed := b.release, b.started, &b.pushed
	require.NoError(t, exp.ConsumeTraces(context.Background(), batch()))
	<-started
	require.NoError(t, exp.ConsumeTraces(context.Background(), batch()), "room for a second batch")

	done := make(chan error, 1)
	go func() { done <- exp.ConsumeTraces(context.Background(), batch()) }()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.False(t, consumererror.IsPermanent(err), "back-pressure: the sender retries")
	case <-time.After(MaxQueueWait + 10*time.Second):
		t.Fatal("a full queue held a caller without a deadline")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	err = exp.ConsumeTraces(ctx, batch())
	cancel()
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the caller's nearer deadline is kept")

	close(release)
	require.NoError(t, exp.Shutdown(context.Background()))
	assert.EqualValues(t, 2, pushed.Load(), "what was accepted was pushed")
}

// blockedPush is a vendor that holds every push until release is closed.
type blockedPush struct {
	release chan struct{}
	started chan struct{}
	pushed  atomic.Int32
}

func newBlockedPush() *blockedPush {
	return &blockedPush{release: make(chan struct{}), started: make(chan struct{}, 10)}
}

func (b *blockedPush) push(context.Context, ptrace.Traces) error {
	b.started <- struct{}{}
	<-b.release
	b.pushed.Add(1)
	return nil
}

// spansNamed is one batch of n spans with names of size bytes.
func spansNamed(n, size int) ptrace.Traces {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for i := 0; i < n; i++ {
		ss.Spans().AppendEmpty().SetName(strings.Repeat("s", size))
	}
	return td
}

// roomFor is a sending queue with room for the first room spans it is offered: past
// them it refuses every call, retryably, as a full queue does.
type roomFor struct {
	component.StartFunc
	component.ShutdownFunc
	room  int
	taken []string
}

func (r *roomFor) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (r *roomFor) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	if len(r.taken)+td.SpanCount() > r.room {
		return errors.New("sending queue is full")
	}
	for sp := range spaniter.All(td) {
		r.taken = append(r.taken, sp.Name())
	}
	return nil
}

// A batch cut into pieces, some cut again (spans differ in size), that the queue takes
// only in part: the refusal names exactly what was not taken, whichever piece or
// sub-piece the room ran out in, so a caller that sends that again delivers every span
// once. Nothing taken: the refusal is whole.
func TestCutRefusalNamesWhatWasNotTaken(t *testing.T) {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	const n = 40
	for i := range n {
		size := 20
		if i < n/2 {
			size = 400 // the first pieces are over the bound again and are cut again
		}
		ss.Spans().AppendEmpty().SetName(fmt.Sprintf("%02d%s", i, strings.Repeat("s", size)))
	}
	for room := 0; room <= n; room++ {
		q := &roomFor{room: room}
		a := admission{Traces: q, max: 2000}
		err := a.ConsumeTraces(context.Background(), td)
		got := map[string]int{}
		for _, name := range q.taken {
			got[name]++
		}
		if len(q.taken) == n {
			require.NoError(t, err, "room %d", room)
		} else {
			require.Error(t, err, "room %d", room)
			var partial consumererror.Traces
			if errors.As(err, &partial) {
				require.NotEmpty(t, q.taken, "room %d: a partial refusal after something was taken", room)
				for sp := range spaniter.All(partial.Data()) {
					got[sp.Name()]++
				}
			} else {
				require.Empty(t, q.taken, "room %d: a whole refusal only when nothing was taken", room)
				for sp := range spaniter.All(td) {
					got[sp.Name()]++
				}
			}
		}
		require.Len(t, got, n, "room %d: every span taken or named", room)
		for name, c := range got {
			require.Equal(t, 1, c, "room %d: span %.2s taken or named once", room, name)
		}
	}
}
