package daemon

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// gatedStore is a store whose aggregate reads can be made to fail or to
// block until released.
type gatedStore struct {
	*store.Store
	mu   sync.Mutex
	fail error
	gate chan struct{} // reads wait for it to be closed, when set
}

func (g *gatedStore) RunCounts(ctx context.Context, f store.AggFilter) ([]store.RunCount, error) {
	g.mu.Lock()
	fail, gate := g.fail, g.gate
	g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if fail != nil {
		return nil, fail
	}
	return g.Store.RunCounts(ctx, f)
}

// SetFeedHead fails and blocks as the sums' reads do: a store that is
// down or slow is so for every read.
func (g *gatedStore) SetFeedHead(ctx context.Context) (int64, error) {
	g.mu.Lock()
	fail, gate := g.fail, g.gate
	g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if fail != nil {
		return 0, fail
	}
	return g.Store.SetFeedHead(ctx)
}

func (g *gatedStore) set(fail error, gate chan struct{}) {
	g.mu.Lock()
	g.fail, g.gate = fail, gate
	g.mu.Unlock()
}

func gather(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	gathered, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]*dto.MetricFamily{}
	for _, f := range gathered {
		fams[f.GetName()] = f
	}
	return fams
}

// TestMetricsKeepLastValuesWhenTheStoreIsDownOrSlow: the store's gauges
// come from its sums; when a read fails they keep their last values with
// orchestrator_store_aggregates_up at 0 and an error counted, never
// vanishing; once reads are slow, a scrape shows the last values at once
// while the read goes on, and the next scrape after it shows the new ones.
func TestMetricsKeepLastValuesWhenTheStoreIsDownOrSlow(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	newWaitingSpecRun(t, st, "w1", "nightly", "qa", "qb")
	g := &gatedStore{Store: st}
	m := NewMetrics(g)

	check := func(what string, want map[string]float64) {
		t.Helper()
		fams := gather(t, m)
		for name, v := range want {
			labels := map[string][]string{
				"orchestrator_spec_questions_pending":      {"spec", "nightly"},
				"orchestrator_store_runs":                  {"spec", "nightly", "status", "waiting"},
				"orchestrator_store_question_sets_pending": {"spec", "nightly", "kind", "marker"},
			}[name]
			if got := value(fams, name, labels...); got != v {
				t.Errorf("%s: %s%v = %v, want %v", what, name, labels, got, v)
			}
		}
		if value(fams, "orchestrator_spec_oldest_pending_age_seconds", "spec", "nightly") < 0 {
			t.Errorf("%s: no age of the oldest pending set of nightly", what)
		}
	}
	check("store up", map[string]float64{"orchestrator_questions_pending": 2, "orchestrator_spec_questions_pending": 2,
		"orchestrator_store_runs": 1, "orchestrator_store_question_sets_pending": 1,
		"orchestrator_store_aggregates_up": 1, "orchestrator_store_aggregates_errors_total": 0})

	g.set(errors.New("database is down"), nil)
	check("store down", map[string]float64{"orchestrator_questions_pending": 2, "orchestrator_spec_questions_pending": 2,
		"orchestrator_store_runs": 1, "orchestrator_store_question_sets_pending": 1,
		"orchestrator_store_aggregates_up": 0, "orchestrator_store_aggregates_errors_total": 1})

	g.set(nil, nil)
	newWaitingSpecRun(t, st, "w2", "nightly", "qc")
	check("store up again", map[string]float64{"orchestrator_questions_pending": 3, "orchestrator_store_aggregates_up": 1})

	// Every read counts as slow from now on: a scrape waits for a read a
	// millisecond at most (an hour before a read was slow, which the
	// test would notice by hanging).
	m.agg.mu.Lock()
	m.agg.slow, m.agg.slowWait, m.agg.wait = -1, time.Millisecond, time.Hour
	m.agg.mu.Unlock()
	gate := make(chan struct{})
	g.set(nil, gate)
	newWaitingSpecRun(t, st, "w3", "nightly", "qd")
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		check("store slow", map[string]float64{"orchestrator_questions_pending": 3, "orchestrator_spec_questions_pending": 3,
			"orchestrator_store_runs": 2})
	}()
	select {
	case <-scraped:
	case <-time.After(time.Minute):
		t.Fatal("a scrape waited for a slow read")
	}
	close(gate) // the read in flight ends, and the next scrape's with it
	waitFor(t, "the read after the slow one to show", func() bool { return value(gather(t, m), "orchestrator_questions_pending") == 4 })
}

// countingStore counts the aggregate reads and makes each take a while.
type countingStore struct {
	*store.Store
	reads atomic.Int32
	took  time.Duration
}

func (c *countingStore) RunCounts(ctx context.Context, f store.AggFilter) ([]store.RunCount, error) {
	c.reads.Add(1)
	time.Sleep(c.took)
	return c.Store.RunCounts(ctx, f)
}

// TestCostlySumsAreReadAtMostOnePercentOfTheTime: while nothing happens in
// the process, scrapes reuse sums whose read was costly (≥ 20 ms) until 100
// times that read's time has passed; a runner event makes the next scrape
// read them again.
func TestCostlySumsAreReadAtMostOnePercentOfTheTime(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	cs := &countingStore{Store: st, took: 50 * time.Millisecond} // reads again after 5 s at the earliest
	m := NewMetrics(cs)
	for range 5 {
		gather(t, m)
	}
	if n := cs.reads.Load(); n != 1 {
		t.Fatalf("%d reads for 5 quiet scrapes, want 1", n)
	}
	m.Observe(runner.Event{Kind: runner.EventTurnStarted, RunID: "r1"})
	gather(t, m)
	if n := cs.reads.Load(); n != 2 {
		t.Fatalf("%d reads after an event, want 2", n)
	}
}
