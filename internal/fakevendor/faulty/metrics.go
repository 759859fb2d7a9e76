package faulty

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Metrics is one scrape of a Prometheus text endpoint: every sample line as it was
// written (name{labels}) with its value.
type Metrics struct {
	Raw     string
	Samples map[string]float64
}

// Scrape reads a Prometheus text exposition (the collector's own /metrics).
func Scrape(url string) (Metrics, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return Metrics{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return Metrics{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Metrics{}, fmt.Errorf("scrape %s: status %s", url, resp.Status)
	}
	return ParseMetrics(string(raw)), nil
}

// ParseMetrics parses Prometheus text format sample lines; comments and malformed lines
// are skipped.
func ParseMetrics(text string) Metrics {
	m := Metrics{Raw: text, Samples: map[string]float64{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m.Samples[line[:i]] = v
	}
	return m
}

// Sum adds the samples of metric name whose label set contains every one of labels
// (each written as key="value"). found is false when no sample matches: a metric the
// endpoint does not export is not a zero.
func (m Metrics) Sum(name string, labels ...string) (sum float64, found bool) {
	for k, v := range m.Samples {
		series, rest, _ := strings.Cut(k, "{")
		if series != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
				break
			}
		}
		if ok {
			sum += v
			found = true
		}
	}
	return sum, found
}

// RSS is a process's resident set size in bytes (Linux /proc).
func RSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read rss: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) >= 1 {
				kb, err := strconv.ParseInt(fields[0], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("parse VmRSS %q: %w", rest, err)
				}
				return kb << 10, nil
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
