package scale

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestWaiting33kLowFileLimit (issue 23, done when 3): 33,000 runs waiting
// on a question in one `serve` on SQLite whose open-file limit is 4,096.
// Once serve has taken them up and holds still, every run is still
// waiting, /healthz answers 200, and answers to a sample of them each
// start their run's CLI again. A waiting run may hold no open file (nor a
// goroutine): 33,000 of them must fit in far fewer descriptors.
//
// ORCHESTRATOR_SCALE_RUNS sets another number of runs, for quick tries.
func TestWaiting33kLowFileLimit(t *testing.T) {
	n := 33000
	if v := os.Getenv("ORCHESTRATOR_SCALE_RUNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 20 {
			t.Fatalf("ORCHESTRATOR_SCALE_RUNS=%q: want a number ≥ 20", v)
		}
	}
	const nofile = 4096
	w := newWorld(t, true, "")
	t.Logf("seeded %d waiting runs in %s", n, w.seed(0, n, 1).Round(time.Millisecond))
	s := w.serve("a", nofile)
	if lim := openFileLimit(t, s.pid()); lim != nofile {
		t.Fatalf("serve's open-file limit is %d, want %d", lim, nofile)
	}
	g := s.settle(t, 10*time.Minute)
	u, err := readUsage(s.pid())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("settled: %.0f goroutines, %d open files, %.0f MB", g, u.fds, float64(u.rss)/1e6)

	code, body, _, err := s.get("/healthz", time.Minute)
	var h struct {
		Status  string
		Waiting int
	}
	switch {
	case err != nil:
		t.Errorf("/healthz: %v", err)
	case code != http.StatusOK:
		t.Errorf("/healthz: %d: %s", code, body)
	case json.Unmarshal(body, &h) != nil:
		t.Errorf("/healthz: not JSON: %s", body)
	case h.Waiting != n:
		t.Errorf("/healthz counts %d waiting runs, want %d", h.Waiting, n)
	}
	st := w.store()
	if got := waiting(t, st); got != n {
		t.Fatalf("%d of %d runs still waiting once serve settled", got, n)
	}
	if log, _ := os.ReadFile(s.log); strings.Contains(string(log), "too many open files") {
		t.Errorf("serve ran out of open files (%d log lines say so), as:\n%s",
			strings.Count(string(log), "too many open files"), grepLines(string(log), "too many open files", 3))
	}

	// A sample across the runs, oldest to newest: each answer starts its
	// run's CLI.
	const sample = 20
	for k := range sample {
		i := k * (n - 1) / (sample - 1)
		at := w.answer(st, i)
		w.waitStart(i, at, 2*time.Minute)
	}
	if got := waiting(t, st); got < n-sample {
		t.Errorf("%d runs waiting after %d answers, want at least %d", got, sample, n-sample)
	}
}

// grepLines returns up to max lines of s that contain sub.
func grepLines(s, sub string, max int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
			if len(out) == max {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// openFileLimit reads the soft open-file limit of process pid.
func openFileLimit(tb testing.TB, pid int) int {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, err := strconv.Atoi(f[0])
				if err == nil {
					return n
				}
			}
		}
	}
	tb.Fatalf("/proc/%d/limits: no open-file limit", pid)
	return 0
}

// answers is how many answers the benchmarks time (p50 of them).
const answers = 21

// BenchmarkWaitingSQLite measures one `serve` on SQLite with 100, 1,000
// and 10,000 runs waiting on a question, seeded straight into its store
// (issue 23, done when 1: at 10,000, ≤ 1% of a core, ≤ 200 MB, fewer
// than 100 goroutines and open files beyond a fixed base, answer → CLI
// start ≤ 30 ms p50).
//
// Over a window (60 s; ORCHESTRATOR_SCALE_WINDOW for quick tries) once
// serve holds still: cpu-% of one core (utime+stime of /proc/PID/stat),
// rss-MB (VmRSS) at the end, goroutines (go_goroutines of /metrics),
// fds (/proc/PID/fd), metrics-ms (a /metrics scrape, median of one per
// 5 s), status-ms and status-KB (`orchestrator status`, run once). Then
// answer-p50-ms: from an answer's Offer call (its commit is inside) to
// the start of the run's CLI (a stub that logs its start and prints a
// result; ORCHESTRATOR_SCALE_CLAUDE execs a real CLI after logging), the
// median of 21 answers one after another.
func BenchmarkWaitingSQLite(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			w := newWorld(b, false, "")
			seeded := w.seed(0, n, 1)
			s := w.serve("a", 0)
			s.settle(b, 10*time.Minute)
			benchServe(b, w, s, n, w.store(), seeded)
		})
	}
}

// BenchmarkWaitingPostgres100k measures the leader of three `serve`
// instances on one PostgreSQL database with 100,000 runs waiting (issue
// 23, done when 2: the leader ≤ 1% of a core and ≤ 300 MB; status ≤
// 200 ms; /metrics ≤ 100 ms). The metrics are BenchmarkWaitingSQLite's,
// of the leader; the answers are resumed by whichever instance claims
// them. ORCHESTRATOR_SCALE_RUNS sets another number of runs.
func BenchmarkWaitingPostgres100k(b *testing.B) {
	n := 100000
	if v := os.Getenv("ORCHESTRATOR_SCALE_RUNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < answers {
			b.Fatalf("ORCHESTRATOR_SCALE_RUNS=%q: want a number ≥ %d", v, answers)
		}
	}
	w := newWorld(b, false, pgtest.Schema(b))
	seeded := w.seed(0, n, 8)
	var nodes []*server
	for _, name := range []string{"a", "b", "c"} {
		nodes = append(nodes, w.serve(name, 0))
	}
	var leader *server
	for _, s := range nodes {
		s.settle(b, 20*time.Minute)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for leader == nil {
		for _, s := range nodes {
			_, body, _, err := s.get("/healthz", time.Minute)
			var h struct{ Leader bool }
			if err == nil && json.Unmarshal(body, &h) == nil && h.Leader {
				leader = s
			}
		}
		if leader == nil && time.Now().After(deadline) {
			b.Fatal("no instance leads after 5 minutes")
		}
	}
	leader.settle(b, 20*time.Minute)
	b.Logf("leader: instance %s", leader.name)
	benchServe(b, w, leader, n, w.store(), seeded)
}

// benchServe measures s over the window, then times the answers; seeded
// is how long the runs took to store (seed-s).
func benchServe(b *testing.B, w *world, s *server, n int, st *store.Store, seeded time.Duration) {
	b.Helper()
	b.ResetTimer()
	m := w.measure(s, windowLength(b))
	if m.statusFailed != nil {
		b.Errorf("status: %v", m.statusFailed)
	}
	lat := make([]float64, 0, answers)
	for k := range answers {
		i := k * (n - 1) / (answers - 1)
		at := w.answer(st, i)
		lat = append(lat, float64(w.waitStart(i, at, 2*time.Minute).Sub(at))/float64(time.Millisecond))
	}
	b.StopTimer()
	b.ReportMetric(m.cpuPct, "cpu-%")
	b.ReportMetric(m.rssMB, "rss-MB")
	b.ReportMetric(m.goroutines, "goroutines")
	b.ReportMetric(float64(m.fds), "fds")
	b.ReportMetric(m.scrapeMS, "metrics-ms")
	b.ReportMetric(m.statusMS, "status-ms")
	b.ReportMetric(float64(m.statusBytes)/1e3, "status-KB")
	b.ReportMetric(median(lat), "answer-p50-ms")
	b.ReportMetric(seeded.Seconds(), "seed-s")
	b.Logf("%d waiting: %.2f%% cpu, %.0f MB, %.0f goroutines, %d fds, /metrics %.1f ms (%d scrapes), status %.0f ms %d B, answer → CLI start p50 %.1f ms (%v)",
		n, m.cpuPct, m.rssMB, m.goroutines, m.fds, m.scrapeMS, m.scrapes, m.statusMS, m.statusBytes, median(lat), lat)
}
