package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/specs"
)

// TestFailingScheduleIsPausedAndResumed: a scheduled spec whose three
// runs in a row fail is paused (no more runs, a notice with the failures'
// errors and how to resume, orchestrator_spec_paused 1); resumed, it ticks
// again; a tick while its run waits is recorded as skipped.
func TestFailingScheduleIsPausedAndResumed(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	f := newFakeRuns(st, store.RunRunning)
	logs := newLogRecorder()
	var mu sync.Mutex
	var notices []ScheduleNotice
	d, err := New(Config{
		Specs:  []specs.Spec{{Name: "nightly", Schedule: "@every 1s", Body: "Do the thing."}},
		Runs:   f,
		Store:  st,
		NewRun: specRun,
		Listen: "127.0.0.1:0",
		Logger: slog.New(logs),
		Notice: func(_ context.Context, n ScheduleNotice) {
			mu.Lock()
			defer mu.Unlock()
			notices = append(notices, n)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, d)
	if v := value(scrape(t, d), "orchestrator_spec_paused", "spec", "nightly"); v != 0 {
		t.Errorf("orchestrator_spec_paused{spec=nightly} before any failure = %v, want 0", v)
	}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		c := f.next(t)
		why := "the model gave up " + c.runID
		if i == 0 {
			// While it runs, a tick or more is skipped as busy.
			logs.waitFor(t, "run skipped: the previous run of the spec is still active", 1)
		}
		if err := st.UpdateRun(ctx, c.runID, store.RunUpdate{Error: &why}); err != nil {
			t.Fatal(err)
		}
		c.finish <- store.RunFailed
		<-c.returned
	}
	logs.waitFor(t, "schedule paused: its last runs failed", 1)
	logs.waitFor(t, "tick skipped: the spec's schedule is paused", 2)
	if n := f.creates.Load(); n != 3 {
		t.Fatalf("%d runs created, want 3 (none once paused)", n)
	}
	p, ok, err := st.SchedulePauseOf(ctx, "nightly")
	if err != nil || !ok || !p.Paused || p.Reason != store.PauseFailures {
		t.Fatalf("pause = %+v, %v, %v", p, ok, err)
	}
	mu.Lock()
	var pn []ScheduleNotice
	for _, n := range notices {
		if n.Kind == NoticePaused {
			pn = append(pn, n)
		}
	}
	if len(pn) != 1 || len(pn[0].Runs) != 3 || pn[0].Spec.Name != "nightly" ||
		!strings.Contains(pn[0].Text, "- run3: the model gave up run3") ||
		!strings.Contains(pn[0].Text, "orchestrator schedule resume nightly") {
		t.Fatalf("notices = %+v", notices)
	}
	mu.Unlock()
	fams := scrape(t, d)
	if v := value(fams, "orchestrator_spec_paused", "spec", "nightly"); v != 1 {
		t.Errorf("orchestrator_spec_paused{spec=nightly} = %v, want 1", v)
	}
	if v := value(fams, "orchestrator_schedule_ticks_skipped_total", "spec", "nightly", "reason", "busy"); v < 1 {
		t.Errorf("orchestrator_schedule_ticks_skipped_total{busy} = %v, want at least 1", v)
	}

	if ok, err := st.ResumeSchedule(ctx, "nightly"); err != nil || !ok {
		t.Fatalf("resume = %v, %v", ok, err)
	}
	c := f.next(t)
	c.finish <- store.RunDone
	if v := value(scrape(t, d), "orchestrator_spec_paused", "spec", "nightly"); v != 0 {
		t.Errorf("orchestrator_spec_paused after resume = %v, want 0", v)
	}
	skips, err := st.ScheduleSkips(ctx)
	if err != nil || len(skips) == 0 || skips[0].Reason != store.SkipBusy {
		t.Fatalf("skips = %+v, %v", skips, err)
	}
}

// TestMissedTicksAreRecordedAtStart: ticks missed while no serve ran are
// recorded and told, once.
func TestMissedTicksAreRecordedAtStart(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	ctx := context.Background()
	if err := st.MarkScheduled(ctx, "daily", time.Now().Add(-50*time.Hour)); err != nil {
		t.Fatal(err)
	}
	notices := make(chan ScheduleNotice, 4)
	d, err := New(Config{
		Specs:  []specs.Spec{{Name: "daily", Schedule: "@daily", Body: "x"}},
		Runs:   newFakeRuns(st, ""),
		Store:  st,
		NewRun: specRun,
		Notice: func(_ context.Context, n ScheduleNotice) { notices <- n },
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, d)
	n := recvNotice(t, notices)
	if n.Kind != NoticeSkipped || len(n.Skips) != 1 || n.Skips[0].Reason != store.SkipMissed || n.Skips[0].Count < 2 ||
		!strings.Contains(n.Text, "missed (no serve ran)") {
		t.Fatalf("notice = %+v", n)
	}
}

// prefixedRuns makes runs of IDs of their own, for two instances on one
// store.
type prefixedRuns struct {
	*fakeRuns
	prefix string
}

func (p prefixedRuns) Create(ctx context.Context, n runner.NewRun) (store.Run, error) {
	id := fmt.Sprintf("%srun%d", p.prefix, p.creates.Add(1))
	return p.st.CreateRun(ctx, store.Run{ID: id, Spec: n.Spec, Prompt: n.Prompt, Surfaces: n.Surfaces, Tick: n.Tick})
}

func recvNotice(t *testing.T, ch <-chan ScheduleNotice) ScheduleNotice {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(wait):
		t.Fatal("no notice")
	}
	return ScheduleNotice{}
}

// TestSchedulePauseHoldsAcrossInstances: on PostgreSQL, a pause made at
// one instance holds at the other from its next tick, and a resume too.
func TestSchedulePauseHoldsAcrossInstances(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	ctx := context.Background()
	open := func() *store.Store {
		st, err := store.OpenDatabase(ctx, t.TempDir(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	drives := make(chan *driveCall, 16)
	var fakes []*fakeRuns
	var logs []*logRecorder
	var stores []*store.Store
	for i := 0; i < 2; i++ {
		st := open()
		f := newFakeRuns(st, store.RunRunning)
		f.drives = drives
		l := newLogRecorder()
		d, err := New(Config{
			Specs: []specs.Spec{{Name: "tick", Schedule: "@every 1s", Body: "x"}},
			Runs:  prefixedRuns{f, fmt.Sprintf("i%d-", i)}, Asks: noAsks{}, Store: st, NewRun: specRun, Logger: slog.New(l),
			AdoptEvery: 200 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		start(t, d)
		fakes, logs, stores = append(fakes, f), append(logs, l), append(stores, st)
	}
	finishing, stop := context.WithCancel(ctx)
	defer stop()
	go func() { // every run ends at once
		for {
			select {
			case c := <-drives:
				c.finish <- store.RunDone
			case <-finishing.Done():
				return
			}
		}
	}()
	created := func() int64 { return fakes[0].creates.Load() + fakes[1].creates.Load() }
	for created() == 0 {
		logs[0].waitFor(t, "run ended", 1)
	}
	// Paused at the first instance: the second's ticks start no run.
	if ok, err := stores[0].PauseSchedule(ctx, store.SchedulePause{Spec: "tick", Reason: store.PauseByHand, By: "alice"}); err != nil || !ok {
		t.Fatalf("pause = %v, %v", ok, err)
	}
	const paused = "tick skipped: the spec's schedule is paused"
	logs[1].waitFor(t, paused, 1)
	logs[0].waitFor(t, paused, 1)
	before := created()
	logs[1].waitFor(t, paused, 3)
	logs[0].waitFor(t, paused, 3)
	if n := created(); n != before {
		t.Fatalf("%d runs created while paused", n-before)
	}
	// Resumed at the second: runs again.
	if ok, err := stores[1].ResumeSchedule(ctx, "tick"); err != nil || !ok {
		t.Fatalf("resume = %v, %v", ok, err)
	}
	deadline := time.After(wait)
	for created() == before {
		select {
		case <-logs[0].seen:
		case <-logs[1].seen:
		case <-deadline:
			t.Fatal("no run after resume")
		}
	}
}
