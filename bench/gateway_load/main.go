// Command gateway_load is the load driver of bench/gateway.sh: it starts N runs across
// T threads concurrently against running `agentmeter serve` replicas (scripted model;
// -url takes one URL per replica; a thread's successive runs are posted to successive
// replicas, as a load balancer without sticky routing spreads them), reports runs/s
// and latency percentiles, then checks the store: every run row complete, no run lost
// or duplicated, and each thread's token-usage totals equal the sum of its runs'
// journals (the end event of each run's stream, as the replica that executed the run
// serves it, carries the journal's totals, computed in memory, independently of the
// database).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

type run struct {
	RunID      string  `json:"run_id"`
	ThreadID   string  `json:"thread_id"`
	Status     string  `json:"status"`
	Error      string  `json:"error"`
	FinishedAt *string `json:"finished_at"`
	Usage      struct {
		TotalTokens       int64 `json:"total_tokens"`
		TotalInputTokens  int64 `json:"total_input_tokens"`
		TotalOutputTokens int64 `json:"total_output_tokens"`
		LeadAgentTokens   int64 `json:"lead_agent_tokens"`
		SubagentTokens    int64 `json:"subagent_tokens"`
		MiddlewareTokens  int64 `json:"middleware_tokens"`
	} `json:"usage"`
}

type totals struct {
	Total, Input, Output int64
}

type tokenUsage struct {
	TotalTokens       int64 `json:"total_tokens"`
	TotalInputTokens  int64 `json:"total_input_tokens"`
	TotalOutputTokens int64 `json:"total_output_tokens"`
	TotalRuns         int64 `json:"total_runs"`
	ByModel           map[string]struct {
		Tokens int64 `json:"tokens"`
	} `json:"by_model"`
}

var (
	urls    = flag.String("url", "http://127.0.0.1:8001", "gateway base URLs, comma-separated (one per replica sharing the store)")
	bases   []string
	key     = flag.String("key-env", "", "environment variable holding the API key (empty: local mode)")
	nRuns   = flag.Int("runs", 500, "runs to start")
	nThr    = flag.Int("threads", 50, "threads the runs are spread over")
	prompt  = flag.String("prompt", "bench run", "prompt prefix (the scripted model matches on it)")
	history = flag.Bool("history", false, "also check that each thread's state holds every one of its runs' prompts (gateway.thread_history on)")
	client  = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000, MaxConnsPerHost: 0}, Timeout: 10 * time.Minute}
)

// do sends a request to the first replica.
func do(method, path, body string) (int, []byte, error) { return doAt(bases[0], method, path, body) }

func doAt(base, method, path, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if *key != "" {
		req.Header.Set("Authorization", "Bearer "+os.Getenv(*key))
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// journalTotals returns the token_usage of a finished run's end event as the replica
// that executed it streams it (its in-memory journal); the other replicas rebuild the
// stream from the store ("source": "store"), which would prove nothing.
func journalTotals(threadID, runID string) (totals, string, error) {
	for _, b := range bases {
		t, status, executed, err := streamEnd(b, threadID, runID)
		if err != nil || executed {
			return t, status, err
		}
	}
	return totals{}, "", errors.New("no replica streams the run's journal")
}

// streamEnd reads a run's stream from base: the end event's totals and status, and
// whether base executed the run (its end event is not rebuilt from the store).
func streamEnd(base, threadID, runID string) (totals, string, bool, error) {
	req, _ := http.NewRequest("GET", base+"/api/threads/"+threadID+"/runs/"+runID+"/stream", nil)
	if *key != "" {
		req.Header.Set("Authorization", "Bearer "+os.Getenv(*key))
	}
	resp, err := client.Do(req)
	if err != nil {
		return totals{}, "", false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	ev := ""
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "event: ") {
			ev = strings.TrimPrefix(line, "event: ")
		}
		if ev == "end" && strings.HasPrefix(line, "data: ") {
			var end struct {
				Status     string `json:"status"`
				Source     string `json:"source"`
				TokenUsage struct {
					TotalTokens       int64 `json:"total_tokens"`
					TotalInputTokens  int64 `json:"total_input_tokens"`
					TotalOutputTokens int64 `json:"total_output_tokens"`
				} `json:"token_usage"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &end); err != nil {
				return totals{}, "", false, err
			}
			return totals{end.TokenUsage.TotalTokens, end.TokenUsage.TotalInputTokens, end.TokenUsage.TotalOutputTokens}, end.Status, end.Source != "store", nil
		}
	}
	return totals{}, "", false, errors.New("stream ended without an end event")
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func main() {
	flag.Parse()
	for _, u := range strings.Split(*urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			bases = append(bases, u)
		}
	}
	if len(bases) == 0 {
		fmt.Fprintln(os.Stderr, "-url: at least one gateway URL is required")
		os.Exit(2)
	}
	threads := make([]string, *nThr)
	stamp := time.Now().UnixNano()
	for i := range threads {
		threads[i] = fmt.Sprintf("bench-%d-t%02d", stamp, i)
	}
	type result struct {
		run     run
		latency time.Duration
		err     error
	}
	results := make([]result, *nRuns)
	var wg sync.WaitGroup
	start := time.Now()
	gate := make(chan struct{})
	for i := range *nRuns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate // start all at once: 500 runs in flight together
			th := threads[i%len(threads)]
			t0 := time.Now()
			// A thread's successive runs go to successive replicas (no sticky routing).
			code, body, err := doAt(bases[(i/len(threads))%len(bases)], "POST", "/api/threads/"+th+"/runs?wait=true", fmt.Sprintf(`{"input":%q}`, fmt.Sprintf("%s %d", *prompt, i)))
			results[i].latency = time.Since(t0)
			if err == nil && code != 200 {
				err = fmt.Errorf("POST run: %d %s", code, body)
			}
			if err == nil {
				err = json.Unmarshal(body, &results[i].run)
			}
			results[i].err = err
		}()
	}
	close(gate)
	wg.Wait()
	elapsed := time.Since(start)

	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	var lat []time.Duration
	byThread := map[string][]run{}
	seen := map[string]bool{}
	for i, r := range results {
		if r.err != nil {
			fail("run %d: %v", i, r.err)
			continue
		}
		lat = append(lat, r.latency)
		if seen[r.run.RunID] {
			fail("run id %s returned twice", r.run.RunID)
		}
		seen[r.run.RunID] = true
		byThread[r.run.ThreadID] = append(byThread[r.run.ThreadID], r.run)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("runs: %d ok of %d across %d threads over %d replicas in %s\n", len(lat), *nRuns, *nThr, len(bases), elapsed.Round(time.Millisecond))
	fmt.Printf("throughput: %.1f runs/s\n", float64(len(lat))/elapsed.Seconds())
	fmt.Printf("latency (POST ?wait=true): p50 %s  p90 %s  p99 %s  max %s\n",
		percentile(lat, 0.50).Round(time.Millisecond), percentile(lat, 0.90).Round(time.Millisecond),
		percentile(lat, 0.99).Round(time.Millisecond), percentile(lat, 1).Round(time.Millisecond))

	// Verification against the store, through the API.
	var grand totals
	for _, th := range threads {
		code, body, err := do("GET", "/api/threads/"+th, "")
		if err != nil || code != 200 {
			fail("GET thread %s: %d %v %s", th, code, err, body)
			continue
		}
		var tr struct {
			Runs []run `json:"runs"`
		}
		if err := json.Unmarshal(body, &tr); err != nil {
			fail("thread %s: %v", th, err)
			continue
		}
		want := map[string]bool{}
		for _, r := range byThread[th] {
			want[r.RunID] = true
		}
		stored := map[string]bool{}
		var journals totals
		for _, r := range tr.Runs {
			if stored[r.RunID] {
				fail("thread %s: run %s stored twice", th, r.RunID)
			}
			stored[r.RunID] = true
			if !want[r.RunID] {
				fail("thread %s: unexpected run %s", th, r.RunID)
			}
			if r.Status != "success" || r.FinishedAt == nil || r.Usage.TotalTokens <= 0 ||
				r.Usage.LeadAgentTokens+r.Usage.SubagentTokens+r.Usage.MiddlewareTokens != r.Usage.TotalTokens {
				fail("run %s incomplete: status %s error %q finished %v usage %+v", r.RunID, r.Status, r.Error, r.FinishedAt != nil, r.Usage)
			}
			j, status, err := journalTotals(th, r.RunID)
			if err != nil || status != "success" {
				fail("run %s stream: %s %v", r.RunID, status, err)
				continue
			}
			if j.Total != r.Usage.TotalTokens || j.Input != r.Usage.TotalInputTokens || j.Output != r.Usage.TotalOutputTokens {
				fail("run %s: row %+v != journal %+v", r.RunID, r.Usage, j)
			}
			journals.Total += j.Total
			journals.Input += j.Input
			journals.Output += j.Output
		}
		for id := range want {
			if !stored[id] {
				fail("thread %s: run %s lost", th, id)
			}
		}
		code, body, err = do("GET", "/api/threads/"+th+"/token-usage", "")
		if err != nil || code != 200 {
			fail("token-usage %s: %d %v", th, code, err)
			continue
		}
		var tu tokenUsage
		if err := json.Unmarshal(body, &tu); err != nil {
			fail("token-usage %s: %v", th, err)
			continue
		}
		var byModel int64
		for _, b := range tu.ByModel {
			byModel += b.Tokens
		}
		if tu.TotalTokens != journals.Total || tu.TotalInputTokens != journals.Input || tu.TotalOutputTokens != journals.Output ||
			tu.TotalRuns != int64(len(want)) || byModel != tu.TotalTokens {
			fail("thread %s: token-usage %s != sum of %d journals %+v", th, body, len(want), journals)
		}
		grand.Total += journals.Total
		if *history {
			checkHistory(th, byThread[th], fail)
		}
	}
	fmt.Printf("verified: %d threads, %d run rows complete, token-usage == sum of journals (%d tokens)\n", len(threads), len(seen), grand.Total)
	if *history {
		fmt.Printf("verified: every thread's state holds all of its runs' prompts and answers\n")
	}
	if len(failures) > 0 {
		for i, f := range failures {
			if i == 20 {
				fmt.Printf("... and %d more\n", len(failures)-20)
				break
			}
			fmt.Println("FAIL:", f)
		}
		os.Exit(1)
	}
	fmt.Println("PASS")
}

// checkHistory reads the thread's state: with history on, the runs of a thread continue
// one another, so its messages hold every run's prompt and one answer per run.
func checkHistory(th string, runs []run, fail func(string, ...any)) {
	code, body, err := do("GET", "/api/threads/"+th+"/state", "")
	if err != nil || code != 200 {
		fail("state %s: %d %v", th, code, err)
		return
	}
	var st struct {
		Values struct {
			Messages []struct {
				Type             string         `json:"type"`
				Content          string         `json:"content"`
				AdditionalKwargs map[string]any `json:"additional_kwargs"`
			} `json:"messages"`
		} `json:"values"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		fail("state %s: %v", th, err)
		return
	}
	prompts, answers := 0, 0
	for _, m := range st.Values.Messages {
		if hidden, _ := m.AdditionalKwargs["hide_from_ui"].(bool); hidden {
			continue // memory and reminders injected by middlewares
		}
		switch {
		case m.Type == "human" && strings.Contains(m.Content, *prompt):
			prompts++
		case m.Type == "ai" && m.Content != "":
			answers++
		}
	}
	if prompts != len(runs) || answers != len(runs) {
		fail("thread %s: state has %d prompts and %d answers for %d runs", th, prompts, answers, len(runs))
	}
}
