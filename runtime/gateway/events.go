package gateway

import (
	"encoding/json"
	"sync"
)

// maxEventsPerRun bounds one run's replay log; later events are dropped from the log
// (a stream that joins late still gets the end event, which is never dropped).
const maxEventsPerRun = 10_000

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	Name string
	Data json.RawMessage
}

// eventLog is a run's event history. Streams replay it from the start, then follow it
// until it is closed, so a client connecting late misses nothing.
type eventLog struct {
	mu      sync.Mutex
	events  []sseEvent
	dropped int
	closed  bool
	changed chan struct{} // closed and replaced on every append and on close
}

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{})} }

// publish appends an event; after close it is a no-op.
func (l *eventLog) publish(name string, payload any) {
	data, err := json.Marshal(payload)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"error": "unencodable event payload: " + err.Error()})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if len(l.events) >= maxEventsPerRun && name != "end" {
		l.dropped++
		return
	}
	l.events = append(l.events, sseEvent{Name: name, Data: data})
	close(l.changed)
	l.changed = make(chan struct{})
}

// close ends the log; followers return after draining it.
func (l *eventLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	close(l.changed)
}

// read returns the events from index from, whether the log is closed, and a channel
// closed at the next change.
func (l *eventLog) read(from int) ([]sseEvent, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sseEvent
	if from < len(l.events) {
		out = append(out, l.events[from:]...)
	}
	return out, l.closed, l.changed
}
