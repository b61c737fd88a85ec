package specs

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSchedulerPausedStartsNoRun: while Paused says so, the ticks start no
// run (and are not counted as skipped); once it no longer does, the next
// tick runs.
func TestSchedulerPausedStartsNoRun(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder()
	var paused atomic.Bool
	paused.Store(true)
	var runs atomic.Int32
	var skips atomic.Int32
	ran := make(chan struct{}, 10)
	sched, err := NewScheduler([]Spec{{Name: "p", Schedule: "@every 1s"}}, func(context.Context, Spec) error {
		runs.Add(1)
		ran <- struct{}{}
		return nil
	}, SchedulerOptions{
		Logger:  slog.New(rec),
		Paused:  func(name string) bool { return name == "p" && paused.Load() },
		Skipped: func(string, string, int64, time.Time) { skips.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	sched.Start(context.Background())
	defer sched.Stop()
	rec.await(t, "p", "tick skipped: the spec's schedule is paused", 2)
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d runs while paused", n)
	}
	if n := skips.Load(); n != 0 {
		t.Fatalf("%d skipped ticks told while paused", n)
	}
	paused.Store(false)
	recv(t, ran, "a run once resumed")
}

// TestSchedulerTellsSkippedTicks: a tick while busy is told as "busy"; at
// Start, the ticks missed since the last run are told as "missed" (all of
// them with catch_up skip, all but the one that runs with once).
func TestSchedulerTellsSkippedTicks(t *testing.T) {
	t.Parallel()
	type skip struct {
		reason string
		n      int64
		last   time.Time
	}
	t.Run("busy", func(t *testing.T) {
		t.Parallel()
		got := make(chan skip, 10)
		sched, err := NewScheduler([]Spec{{Name: "b", Schedule: "@every 1s"}}, func(context.Context, Spec) error { return nil },
			SchedulerOptions{
				Busy:    func(string) bool { return true },
				Skipped: func(_, reason string, n int64, last time.Time) { got <- skip{reason, n, last} },
			})
		if err != nil {
			t.Fatal(err)
		}
		sched.Start(context.Background())
		defer sched.Stop()
		if k := recv(t, got, "a busy skip"); k.reason != SkipBusy || k.n != 1 || k.last.IsZero() {
			t.Fatalf("skip = %+v", k)
		}
	})
	now := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		policy string
		want   int64
	}{{CatchUpSkip, 3}, {CatchUpOnce, 2}} {
		t.Run("missed "+tt.policy, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var got []skip
			sched, err := NewScheduler([]Spec{{Name: "daily", Schedule: "0 3 * * *"}}, func(context.Context, Spec) error { return nil },
				SchedulerOptions{
					CatchUp:  tt.policy,
					Location: time.UTC,
					Now:      func() time.Time { return now },
					LastRun:  func(string) (time.Time, bool) { return now.Add(-58 * time.Hour), true },
					Skipped: func(_, reason string, n int64, last time.Time) {
						mu.Lock()
						defer mu.Unlock()
						got = append(got, skip{reason, n, last})
					},
				})
			if err != nil {
				t.Fatal(err)
			}
			sched.Start(context.Background())
			awaitDone(t, sched.Stop(), "stop")
			mu.Lock()
			defer mu.Unlock()
			want := time.Date(2026, 1, 10, 3, 0, 0, 0, time.UTC)
			if len(got) != 1 || got[0].reason != SkipMissed || got[0].n != tt.want || !got[0].last.Equal(want) {
				t.Fatalf("skips = %+v", got)
			}
		})
	}
}
