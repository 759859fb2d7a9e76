// Command subagentmerge_loadgen drives a running collector with DeerFlow-shaped agent
// runs over OTLP/gRPC and reports end-to-end throughput and the collector's peak memory.
//
// Every request is acked before it counts (nothing is dropped client side, unlike
// telemetrygen --rate 0, which drops what the collector refuses). Each worker keeps -runs runs in flight and
// puts the next few spans of each, in the order spans end (children before parents, the
// root last), into every request, so a run's spans spread over several requests the way
// an SDK exports concurrent runs. End to end is measured until the collector's
// otelcol_exporter_sent_spans reaches the number of spans acked (summed over every
// exporter, or reached by each of -exporters). bench/compare runs it for every
// end-to-end pair of docs/performance.md.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/agentmeter/agentmeter/bench/agentrun"
	"github.com/agentmeter/agentmeter/genai"
)

func main() {
	endpoint := flag.String("endpoint", "127.0.0.1:4317", "collector OTLP/gRPC endpoint")
	total := flag.Int("spans", 200_000, "spans to send (rounded up to whole runs)")
	workers := flag.Int("workers", 4, "concurrent senders")
	runs := flag.Int("runs", 100, "runs in flight per worker")
	perRun := flag.Int("spans-per-run-per-request", 4, "at most this many spans of each in-flight run per request")
	metrics := flag.String("metrics", "http://127.0.0.1:8888/metrics", "collector internal metrics (Prometheus text)")
	pid := flag.Int("pid", 0, "collector pid, for peak RSS (VmHWM) and CPU time")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up waiting for the collector after this long")
	exporters := flag.String("exporters", "", "comma-separated exporter ids that must each send every span, a+b for exporters that share the spans between them (default: the sum over all exporters)")
	allowLoss := flag.Bool("allow-loss", false, "report spans never exported (lost=) instead of failing; e2e then ends at the last export")
	mark := flag.Int64("mark-spans", 0, "with -pid: also report the time, the collector's CPU and its peak RSS when this many spans were acked (mark_s, mark_cpu_s, peak_rss_at_mark_mib)")
	placed := flag.Bool("placed", false, "put on every span the LangSmith placement the agentmeter runtime gives it (langsmith.span.dotted_order)")
	flag.Parse()
	var wantExporters []string
	if *exporters != "" {
		wantExporters = strings.Split(*exporters, ",")
	}
	// CPU before the load: the collector's start-up is not part of the spans' cost
	cpuStart := 0.0
	if *pid > 0 {
		cpuStart = cpuSeconds(*pid)
	}

	conn, err := grpc.NewClient(*endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatalf("dial %s: %v", *endpoint, err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)

	baseline, err := sentSpans(*metrics, wantExporters)
	if err != nil {
		log.Fatalf("reading collector metrics: %v", err)
	}
	var budget atomic.Int64
	budget.Store(int64(*total))
	// refused counts retryable refusals (memory_limiter's Unavailable, a full queue) that
	// were sent again, as an OTLP SDK exporter does; failed counts requests given up on
	var acked, failed, refused atomic.Int64
	// when acked first reached -mark-spans: VmHWM, CPU and time since start
	var markKB atomic.Int64
	var markCPU, markAt atomic.Value
	var traceNo atomic.Uint64
	start := time.Now()
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &sender{r: rand.New(rand.NewPCG(uint64(w), 1)), traceNo: &traceNo, placed: *placed}
			for {
				td, n := s.request(*runs, *perRun, &budget)
				if n == 0 {
					return
				}
				err := exportRetrying(client, ptraceotlp.NewExportRequestFromTraces(td), &refused)
				if err != nil {
					failed.Add(1)
					log.Printf("export: %v", err)
					continue
				}
				if a := acked.Add(int64(n)); *mark > 0 && *pid > 0 && a >= *mark && a-int64(n) < *mark {
					markAt.Store(time.Since(start))
					markCPU.Store(cpuSeconds(*pid) - cpuStart)
					markKB.Store(procStatusKB(*pid, "VmHWM:"))
				}
			}
		}()
	}
	wg.Wait()
	ingest := time.Since(start)
	want := baseline + acked.Load()
	deadline := time.Now().Add(*timeout)
	got, lastExport := baseline, time.Now()
	for got < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if v, err := sentSpans(*metrics, wantExporters); err == nil {
			if v > got {
				lastExport = time.Now()
			}
			got = v
		}
	}
	e2e := time.Since(start)
	exported := got - baseline
	if got < want && *allowLoss {
		// what was exported, over the time it took; the wait for spans that never came is not
		// part of the rate
		e2e = lastExport.Sub(start)
	}
	fmt.Printf("spans_acked=%d failed_requests=%d refused_retried=%d ingest_s=%.2f ingest_spans_per_s=%.0f exported=%d lost=%d e2e_s=%.2f e2e_spans_per_s=%.0f",
		acked.Load(), failed.Load(), refused.Load(), ingest.Seconds(), float64(acked.Load())/ingest.Seconds(),
		exported, max(0, acked.Load()-exported), e2e.Seconds(), float64(min(exported, acked.Load()))/e2e.Seconds())
	if *pid > 0 {
		fmt.Printf(" peak_rss_mib=%.1f cpu_s=%.2f", float64(procStatusKB(*pid, "VmHWM:"))/1024, cpuSeconds(*pid)-cpuStart)
		if kb := markKB.Load(); kb > 0 {
			fmt.Printf(" mark_s=%.2f mark_cpu_s=%.2f peak_rss_at_mark_mib=%.1f",
				markAt.Load().(time.Duration).Seconds(), markCPU.Load().(float64), float64(kb)/1024)
		}
	}
	fmt.Println()
	if got < want && !*allowLoss {
		log.Fatalf("the collector exported %d of %d spans before the timeout", exported, acked.Load())
	}
}

// exportRetrying sends one request and, like the OTLP exporters of the SDKs, sends it again
// with backoff while the collector answers with a retryable refusal (Unavailable or
// ResourceExhausted: memory_limiter or a full queue pushing back). Without that, a refused
// request leaves the rest of its traces waiting in subagentmerge for wait_duration and the
// run would measure the load generator, not the collector. It gives up after a minute.
func exportRetrying(client ptraceotlp.GRPCClient, req ptraceotlp.ExportRequest, refused *atomic.Int64) error {
	backoff := 20 * time.Millisecond
	giveUp := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := client.Export(ctx, req)
		cancel()
		if err == nil {
			return nil
		}
		switch status.Code(err) {
		case codes.Unavailable, codes.ResourceExhausted:
			if time.Now().After(giveUp) {
				return fmt.Errorf("still refused after a minute of retries: %w", err)
			}
			refused.Add(1)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
		default:
			return err
		}
	}
}

// sender builds requests from its runs in flight.
type sender struct {
	r       *rand.Rand
	traceNo *atomic.Uint64
	active  [][]ptrace.Span // remaining spans of each run, in end order
	owners  []ptrace.Traces // the Traces each run's spans live in
	placed  bool            // runs carry the runtime's LangSmith placement
}

// request takes up to perRun spans of each run in flight. New runs start while the
// budget lasts; runs already started are always finished.
func (s *sender) request(runs, perRun int, budget *atomic.Int64) (ptrace.Traces, int) {
	for len(s.active) < runs && budget.Load() > 0 {
		td, spans := s.newRun()
		budget.Add(-int64(len(spans)))
		s.active = append(s.active, spans)
		s.owners = append(s.owners, td)
	}
	out := ptrace.NewTraces()
	rs := out.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(genai.AttrServiceName, "deer-flow")
	rs.Resource().Attributes().PutStr("service.version", "2.0.0")
	rs.Resource().Attributes().PutStr("host.name", "agent-7f9c")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("agentmeter/runtime")
	n := 0
	active, owners := s.active[:0], s.owners[:0]
	for i, spans := range s.active {
		take := min(len(spans), 1+s.r.IntN(perRun))
		for _, sp := range spans[:take] {
			sp.CopyTo(ss.Spans().AppendEmpty())
			n++
		}
		if rest := spans[take:]; len(rest) > 0 {
			active = append(active, rest)
			owners = append(owners, s.owners[i])
		}
	}
	clear(s.owners[len(owners):])
	s.active, s.owners = active, owners
	return out, n
}

// newRun builds one run (bench/agentrun), its spans in end order, the root last.
func (s *sender) newRun() (ptrace.Traces, []ptrace.Span) {
	r := agentrun.New(s.r, s.traceNo.Add(1))
	if s.placed {
		r.Place()
	}
	return r.Traces, r.Spans
}

// sentSpans sums otelcol_exporter_sent_spans over every exporter; with exporters named,
// it is the least of theirs (every one of them must have sent a span for it to count).
// An entry a+b is the sum of a's and b's: exporters that each send a part of the spans
// (LangSmith's placed spans and its gathered ones).
func sentSpans(url string, exporters []string) (int64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	var sum float64
	per := make([]float64, len(exporters))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "otelcol_exporter_sent_spans") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		sum += v
		for i, group := range exporters {
			for _, id := range strings.Split(group, "+") {
				if strings.Contains(line, `exporter="`+id+`"`) {
					per[i] += v
				}
			}
		}
	}
	if len(exporters) == 0 {
		return int64(sum), sc.Err()
	}
	least := per[0]
	for _, v := range per[1:] {
		least = min(least, v)
	}
	return int64(least), sc.Err()
}

// procStatusKB reads a kB field (e.g. VmHWM:) of /proc/<pid>/status.
func procStatusKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field) {
			f := strings.Fields(line)
			if len(f) >= 2 {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				return v
			}
		}
	}
	return 0
}

// cpuSeconds is utime+stime of the process (clock ticks at 100 Hz).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / 100
}
