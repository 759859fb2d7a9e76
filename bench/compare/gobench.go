package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentmeter/agentmeter/internal/childproc"
)

// benchResults maps a benchmark name (GOMAXPROCS suffix removed) to one map of reported
// metrics (unit -> value) per -count run, in order.
type benchResults map[string][]map[string]float64

var procSuffix = regexp.MustCompile(`-\d+$`)

// parseBench reads `go test -bench` output.
func parseBench(out string) benchResults {
	res := benchResults{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		m := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			m[f[i+1]] = v
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		res[name] = append(res[name], m)
	}
	return res
}

// metric returns the series of one metric of one benchmark, one value per -count run.
func (r benchResults) metric(name, unit string) ([]float64, error) {
	runs, ok := r[name]
	if !ok {
		return nil, fmt.Errorf("benchmark %s did not report", name)
	}
	var out []float64
	for _, m := range runs {
		v, ok := m[unit]
		if !ok {
			return nil, fmt.Errorf("benchmark %s did not report %s", name, unit)
		}
		out = append(out, v)
	}
	return out, nil
}

// goBench runs `go test -bench` in the repository and returns the parsed results.
func (b *bench) goBench(pkg, pattern, benchtime string, count int, hard time.Duration) (benchResults, error) {
	return b.goBenchWith(nil, nil, pkg, pattern, benchtime, count, hard)
}

// goBenchWith is goBench with extra `go test` flags (build tags) and environment.
func (b *bench) goBenchWith(flags, env []string, pkg, pattern, benchtime string, count int, hard time.Duration) (benchResults, error) {
	hard, err := b.bound(hard)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), hard)
	defer cancel()
	args := append([]string{"test"}, flags...)
	args = append(args, "-run", "^$", "-bench", pattern, "-benchtime", benchtime,
		"-count", strconv.Itoa(count), "-timeout", hard.String(), pkg)
	cmd := groupCommand(ctx, "go", args...)
	cmd.Dir = b.repo
	// the benchmarks must not pick up a vendor's settings from the shell either
	cmd.Env = collectorEnv(env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, childproc.LastLines(string(out), 20))
	}
	return parseBench(string(out)), nil
}

// groupCommand runs name in its own process group, and the timeout ends the whole group:
// the test binary `go test` started, `agentmeter serve` under gateway.sh.
func groupCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// gateway is one bench/gateway.sh run.
type gateway struct{ RunsPerS, P50ms, P99ms float64 }

var (
	gwThroughput = regexp.MustCompile(`throughput: ([0-9.]+) runs/s`)
	gwLatency    = regexp.MustCompile(`p50 (\S+)\s+p90 (\S+)\s+p99 (\S+)`)
)

func (b *bench) runGateway(runs, threads int, hard time.Duration) (gateway, error) {
	hard, err := b.bound(hard)
	if err != nil {
		return gateway{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), hard)
	defer cancel()
	cmd := groupCommand(ctx, "bench/gateway.sh")
	cmd.Dir = b.repo
	cmd.Env = append(collectorEnv(nil), "RUNS="+strconv.Itoa(runs), "THREADS="+strconv.Itoa(threads), "STORE=sqlite")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return gateway{}, fmt.Errorf("bench/gateway.sh: %w\n%s", err, childproc.LastLines(string(out), 20))
	}
	s := string(out)
	if !strings.Contains(s, "\nPASS") {
		return gateway{}, fmt.Errorf("bench/gateway.sh did not verify the store:\n%s", childproc.LastLines(s, 20))
	}
	t := gwThroughput.FindStringSubmatch(s)
	l := gwLatency.FindStringSubmatch(s)
	if t == nil || l == nil {
		return gateway{}, fmt.Errorf("bench/gateway.sh output not understood:\n%s", childproc.LastLines(s, 20))
	}
	var g gateway
	g.RunsPerS, _ = strconv.ParseFloat(t[1], 64)
	p50, err1 := time.ParseDuration(l[1])
	p99, err2 := time.ParseDuration(l[3])
	if err1 != nil || err2 != nil {
		return gateway{}, fmt.Errorf("bench/gateway.sh latency %q: %v %v", l[0], err1, err2)
	}
	g.P50ms, g.P99ms = float64(p50)/1e6, float64(p99)/1e6
	return g, nil
}
