package storetest

import (
	"testing"

	"github.com/agentmeter/agentmeter/runtime/store"
)

// testTextNotUTF8: a run's error can quote what a provider or a tool answered, in any
// encoding (a proxy's GBK error page). PostgreSQL refuses text that is not UTF-8, which
// would fail the run's completion and lose its token counts; every backend stores it
// with each run of invalid bytes as one U+FFFD instead, and the same.
func testTextNotUTF8(t *testing.T, s store.RunStore) {
	must(t, s.CreateRun(ctx, store.Run{RunID: "gbk", ThreadID: "t", Status: store.StatusRunning}))
	ok, err := s.UpdateRunCompletion(ctx, "gbk", store.Completion{
		Status: store.StatusError, Usage: usage(5, 3, 2, 5, 0, 0, nil),
		Error: "openai: 502 \xb7\xfe\xce\xf1\xc6\xf7", StopReason: "error \xff",
	})
	must(t, err)
	if !ok {
		t.Fatal("completion not applied")
	}
	r, err := s.GetRun(ctx, "gbk")
	must(t, err)
	if r.Status != store.StatusError || r.Usage.TotalTokens != 5 {
		t.Errorf("run = %s with %d tokens, want error with 5", r.Status, r.Usage.TotalTokens)
	}
	if want := "openai: 502 \ufffd"; r.Error != want {
		t.Errorf("error = %q, want %q", r.Error, want)
	}
	if want := "error \ufffd"; r.StopReason != want {
		t.Errorf("stop reason = %q, want %q", r.StopReason, want)
	}
	must(t, s.CreateRun(ctx, store.Run{RunID: "gbk-2", ThreadID: "t", Status: store.StatusRunning}))
	n, err := s.InterruptRuns(ctx, []string{"gbk-2"}, "shutdown \xff")
	must(t, err)
	r, err = s.GetRun(ctx, "gbk-2")
	must(t, err)
	if n != 1 || r.Status != store.StatusInterrupted || r.Error != "shutdown \ufffd" {
		t.Errorf("interrupted %d: %s, error %q", n, r.Status, r.Error)
	}
}
