package specs

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // CRON_TZ zones on machines without a zone database

	"github.com/robfig/cron/v3"
)

// wait is how long a test waits for something that should happen; ticks
// are every second, so this is generous for a slow, loaded machine.
const wait = 30 * time.Second

// logEvent is one log record: its message and its "spec" attribute.
type logEvent struct{ msg, spec string }

// logRecorder is a slog.Handler that sends every record to a channel.
type logRecorder struct{ ch chan logEvent }

func newLogRecorder() *logRecorder { return &logRecorder{ch: make(chan logEvent, 10000)} }

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	e := logEvent{msg: rec.Message}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "spec" {
			e.spec = a.Value.String()
		}
		return true
	})
	select {
	case r.ch <- e:
	default:
	}
	return nil
}

// await waits for n records of spec whose message starts with prefix.
func (r *logRecorder) await(t *testing.T, spec, prefix string, n int) {
	t.Helper()
	timeout := time.After(wait)
	for n > 0 {
		select {
		case e := <-r.ch:
			if e.spec == spec && strings.HasPrefix(e.msg, prefix) {
				n--
			}
		case <-timeout:
			t.Fatalf("timed out waiting for %d more %q logs of %s", n, prefix, spec)
		}
	}
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

func awaitDone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestSchedulerNoOverlap runs a spec every second whose first run blocks
// (as a run waiting on a question does): the next ticks are skipped with one
// run active, and once it returns the next tick starts a new run.
func TestSchedulerNoOverlap(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder()
	var runs, active, maxActive atomic.Int32
	started := make(chan int32, 10)
	release := make(chan struct{})
	var marks atomic.Int32
	run := func(ctx context.Context, s Spec) error {
		n := runs.Add(1)
		a := active.Add(1)
		defer active.Add(-1)
		for {
			m := maxActive.Load()
			if a <= m || maxActive.CompareAndSwap(m, a) {
				break
			}
		}
		started <- n
		if n == 1 {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	sched, err := NewScheduler([]Spec{{Name: "tick", Schedule: "@every 1s", Body: "T"}}, run, SchedulerOptions{
		Logger:  slog.New(rec),
		MarkRun: func(string, time.Time) { marks.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sched.Start(ctx)
	defer sched.Stop()

	if n := recv(t, started, "the first run"); n != 1 {
		t.Fatalf("first run is number %d", n)
	}
	rec.await(t, "tick", "run skipped: the previous run", 2)
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs while the first was waiting, want 1", n)
	}
	if e := sched.Entries()[0]; !e.Running || e.Prev.IsZero() {
		t.Errorf("entry while running = %+v", e)
	}
	close(release)
	if n := recv(t, started, "the run after the answer"); n != 2 {
		t.Fatalf("next run is number %d", n)
	}
	awaitDone(t, sched.Stop(), "stop")
	if m := maxActive.Load(); m != 1 {
		t.Errorf("%d runs were active at once, want 1", m)
	}
	if m, r := marks.Load(), runs.Load(); m != r {
		t.Errorf("MarkRun called %d times for %d runs", m, r)
	}
}

func TestSchedulerBusy(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder()
	var busy atomic.Bool
	busy.Store(true)
	var runs atomic.Int32
	ran := make(chan struct{}, 10)
	sched, err := NewScheduler([]Spec{{Name: "b", Schedule: "@every 1s"}}, func(context.Context, Spec) error {
		runs.Add(1)
		ran <- struct{}{}
		return nil
	}, SchedulerOptions{Logger: slog.New(rec), Busy: func(name string) bool { return name == "b" && busy.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.RunNow(context.Background(), "b"); !errors.Is(err, ErrBusy) {
		t.Errorf("RunNow while busy = %v, want ErrBusy", err)
	}
	sched.Start(context.Background())
	defer sched.Stop()
	rec.await(t, "b", "run skipped: a run of the spec is active or waiting", 1)
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d runs while busy", n)
	}
	busy.Store(false)
	recv(t, ran, "a run once not busy")
}

func TestSchedulerRunNow(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	release := make(chan struct{})
	boom := errors.New("boom")
	sched, err := NewScheduler([]Spec{{Name: "a"}, {Name: "fail"}}, func(ctx context.Context, s Spec) error {
		if s.Name == "fail" {
			return boom
		}
		entered <- struct{}{}
		<-release
		return nil
	}, SchedulerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- sched.RunNow(context.Background(), "a") }()
	recv(t, entered, "the run")
	if err := sched.RunNow(context.Background(), "a"); !errors.Is(err, ErrBusy) {
		t.Errorf("second RunNow = %v, want ErrBusy", err)
	}
	if !sched.Entries()[0].Running {
		t.Error("entry not running")
	}
	close(release)
	if err := recv(t, done, "RunNow"); err != nil {
		t.Errorf("RunNow = %v", err)
	}
	if err := sched.RunNow(context.Background(), "fail"); !errors.Is(err, boom) {
		t.Errorf("RunNow(fail) = %v, want boom", err)
	}
	if err := sched.RunNow(context.Background(), "nope"); !errors.Is(err, ErrUnknownSpec) {
		t.Errorf("RunNow(nope) = %v, want ErrUnknownSpec", err)
	}
	awaitDone(t, sched.Stop(), "stop")
	if err := sched.RunNow(context.Background(), "a"); !errors.Is(err, ErrStopped) {
		t.Errorf("RunNow after Stop = %v, want ErrStopped", err)
	}
}

func TestSchedulerMaxConcurrent(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder()
	started := make(chan string, 10)
	release := make(chan struct{})
	var active, maxActive atomic.Int32
	sched, err := NewScheduler([]Spec{{Name: "a"}, {Name: "b"}, {Name: "c"}}, func(ctx context.Context, s Spec) error {
		a := active.Add(1)
		defer active.Add(-1)
		if a > maxActive.Load() {
			maxActive.Store(a)
		}
		started <- s.Name
		<-release
		return nil
	}, SchedulerOptions{MaxConcurrent: 1, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	go func() { errs <- sched.RunNow(context.Background(), "a") }()
	if got := recv(t, started, "run a"); got != "a" {
		t.Fatalf("started %s", got)
	}
	go func() { errs <- sched.RunNow(context.Background(), "b") }()
	rec.await(t, "b", "run waiting for a free slot", 1)

	// c gives up waiting when its context ends.
	cctx, ccancel := context.WithCancel(context.Background())
	go func() { errs <- sched.RunNow(cctx, "c") }()
	rec.await(t, "c", "run waiting for a free slot", 1)
	ccancel()
	if err := recv(t, errs, "c to give up"); !errors.Is(err, context.Canceled) {
		t.Errorf("RunNow(c) = %v, want canceled", err)
	}
	select {
	case s := <-started:
		t.Fatalf("%s started while a holds the only slot", s)
	default:
	}
	close(release)
	if got := recv(t, started, "run b"); got != "b" {
		t.Fatalf("started %s", got)
	}
	for range 2 {
		if err := recv(t, errs, "runs to return"); err != nil {
			t.Errorf("RunNow = %v", err)
		}
	}
	if m := maxActive.Load(); m != 1 {
		t.Errorf("%d runs active at once, want 1", m)
	}
}

// TestSchedulerPanic: a panicking run is logged and the scheduler goes on,
// on ticks and by hand.
func TestSchedulerPanic(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder()
	var runs atomic.Int32
	ran := make(chan int32, 10)
	sched, err := NewScheduler([]Spec{{Name: "p", Schedule: "@every 1s"}, {Name: "h"}}, func(ctx context.Context, s Spec) error {
		n := runs.Add(1)
		if s.Name == "h" || n == 1 {
			panic("kaboom")
		}
		ran <- n
		return nil
	}, SchedulerOptions{Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.RunNow(context.Background(), "h"); err == nil || !strings.Contains(err.Error(), "panic: kaboom") {
		t.Errorf("RunNow(h) = %v, want the panic as error", err)
	}
	runs.Store(0)
	sched.Start(context.Background())
	defer sched.Stop()
	rec.await(t, "p", "run panicked", 1)
	if n := recv(t, ran, "the run after the panic"); n < 2 {
		t.Errorf("run %d after the panic", n)
	}
}

func TestSchedulerCatchUp(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		policy  string
		last    time.Time
		hasLast bool
		want    bool
	}{
		{"once, missed two", CatchUpOnce, now.Add(-34 * time.Hour), true, true},
		{"once, missed one", CatchUpOnce, time.Date(2026, 1, 10, 2, 59, 0, 0, time.UTC), true, true},
		{"once, nothing missed", CatchUpOnce, time.Date(2026, 1, 10, 3, 0, 0, 0, time.UTC), true, false},
		{"once, never ran", CatchUpOnce, time.Time{}, false, false},
		{"skip", CatchUpSkip, now.Add(-34 * time.Hour), true, false},
		{"default is skip", "", now.Add(-34 * time.Hour), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			var mu sync.Mutex
			var marked []time.Time
			sched, err := NewScheduler([]Spec{{Name: "daily", Schedule: "0 3 * * *"}, {Name: "manual"}}, func(context.Context, Spec) error {
				runs.Add(1)
				return nil
			}, SchedulerOptions{
				CatchUp:  tt.policy,
				Location: time.UTC,
				Now:      func() time.Time { return now },
				LastRun: func(string) (time.Time, bool) {
					return tt.last, tt.hasLast
				},
				MarkRun: func(name string, at time.Time) {
					mu.Lock()
					defer mu.Unlock()
					if name != "daily" {
						t.Errorf("MarkRun(%s)", name)
					}
					marked = append(marked, at)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			sched.Start(context.Background())
			// Stop's context waits for the catch-up run, which Start
			// has already claimed.
			awaitDone(t, sched.Stop(), "stop")
			want := int32(0)
			if tt.want {
				want = 1
			}
			if n := runs.Load(); n != want {
				t.Errorf("%d runs, want %d", n, want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(marked) != int(want) || (want == 1 && !marked[0].Equal(now)) {
				t.Errorf("marked %v", marked)
			}
		})
	}
}

func TestSchedulerNextAndEntries(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	last := now.Add(-time.Hour)
	specs := []Spec{
		{Name: "daily", Schedule: "0 3 * * *"},
		{Name: "ny", Schedule: "CRON_TZ=America/New_York 0 9 * * *"},
		{Name: "berlin-local", Schedule: "@midnight"},
		{Name: "hourly", Schedule: "@every 1h"},
		{Name: "manual"},
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	sched, err := NewScheduler(specs, func(context.Context, Spec) error { return nil }, SchedulerOptions{
		Location: berlin,
		Now:      func() time.Time { return now },
		LastRun: func(name string) (time.Time, bool) {
			return last, name == "hourly"
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Time{
		"daily":        time.Date(2026, 1, 11, 2, 0, 0, 0, time.UTC), // 03:00 in Berlin
		"ny":           time.Date(2026, 1, 10, 14, 0, 0, 0, time.UTC),
		"berlin-local": time.Date(2026, 1, 10, 23, 0, 0, 0, time.UTC),
		"hourly":       now.Add(time.Hour),
		"manual":       {},
	}
	for name, w := range want {
		if got := sched.Next(name); !got.Equal(w) {
			t.Errorf("Next(%s) = %v, want %v", name, got, w)
		}
	}
	if sp, ok := sched.Spec("ny"); !ok || sp.Schedule != specs[1].Schedule {
		t.Errorf("Spec(ny) = %+v, %v", sp, ok)
	}
	if _, ok := sched.Spec("nope"); ok {
		t.Error("Spec(nope) found")
	}
	if got := sched.Next("nope"); !got.IsZero() {
		t.Errorf("Next(nope) = %v", got)
	}
	entries := sched.Entries()
	if len(entries) != len(specs) {
		t.Fatalf("%d entries", len(entries))
	}
	for i, e := range entries {
		if e.Spec != specs[i].Name || e.Schedule != specs[i].Schedule || !e.Next.Equal(want[e.Spec]) || e.Running {
			t.Errorf("entry %d = %+v", i, e)
		}
		if wantPrev := e.Spec == "hourly"; wantPrev != e.Prev.Equal(last) {
			t.Errorf("entry %s Prev = %v", e.Spec, e.Prev)
		}
	}
}

func TestNewSchedulerErrors(t *testing.T) {
	t.Parallel()
	run := func(context.Context, Spec) error { return nil }
	if _, err := NewScheduler(nil, nil, SchedulerOptions{}); err == nil {
		t.Error("no error without a run function")
	}
	_, err := NewScheduler([]Spec{
		{Name: "a", Path: "a.md"},
		{Name: "a", Path: "b.md"},
		{Name: "c", Path: "c.md", Schedule: "every day"},
	}, run, SchedulerOptions{CatchUp: "twice", MaxConcurrent: -1})
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error = %v, want Errors", err)
	}
	var keys []string
	for _, e := range errs {
		keys = append(keys, e.File+" "+e.Key)
	}
	if got, want := strings.Join(keys, ","), " serve.catch_up, serve.max_concurrent_runs,b.md name,c.md schedule"; got != want {
		t.Errorf("errors %q, want %q:\n%v", got, want, err)
	}
}

// TestSchedulerStop: Stop does not wait for running jobs, its context does;
// cancelling Start's context stops the scheduler.
func TestSchedulerStop(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 10)
	sched, err := NewScheduler([]Spec{{Name: "s", Schedule: "@every 1s"}}, func(ctx context.Context, s Spec) error {
		entered <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}, SchedulerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sched.Start(ctx)
	recv(t, entered, "the run")
	stopped := sched.Stop()
	select {
	case <-stopped.Done():
		t.Fatal("Stop's context is done while a run is active")
	default:
	}
	if again := sched.Stop(); again != stopped {
		t.Error("a second Stop returned another context")
	}
	cancel() // interrupts the run
	awaitDone(t, stopped, "the run to return")

	// A scheduler whose Start context ends stops by itself.
	sched2, err := NewScheduler([]Spec{{Name: "s", Schedule: "@every 1s"}}, func(context.Context, Spec) error { return nil }, SchedulerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	sched2.Start(ctx2)
	cancel2()
	deadline := time.Now().Add(wait)
	for !errors.Is(sched2.RunNow(context.Background(), "s"), ErrStopped) {
		if time.Now().After(deadline) {
			t.Fatal("scheduler not stopped after its context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func BenchmarkSchedulerNext(b *testing.B) {
	sched, err := NewScheduler([]Spec{{Name: "s", Schedule: "CRON_TZ=Europe/Berlin 30 2 * * 1-5"}}, func(context.Context, Spec) error { return nil }, SchedulerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if sched.Next("s").IsZero() {
			b.Fatal("no next time")
		}
	}
}

// TestSchedulerSetWhileRunning changes the specs of a running scheduler: a
// spec added ticks, a changed spec's next run has the new version while
// the active run keeps the one it started with, a removed spec ticks no
// more, and a bad schedule keeps the spec's current version.
func TestSchedulerSetWhileRunning(t *testing.T) {
	t.Parallel()
	rec := newLogRecorder()
	type ran struct{ name, body string }
	runs := make(chan ran, 100)
	release := make(chan struct{})
	var held atomic.Bool
	run := func(ctx context.Context, s Spec) error {
		runs <- ran{s.Name, s.Body}
		if s.Name == "a" && s.Body == "v1" && held.CompareAndSwap(false, true) {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}
	sched, err := NewScheduler(nil, run, SchedulerOptions{Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sched.Start(ctx)
	defer sched.Stop()

	// Added while running: it ticks, and its first run blocks.
	if err := sched.Set([]Spec{{Name: "a", Schedule: "@every 1s", Body: "v1"}}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, runs, "a run of the added spec"); r != (ran{"a", "v1"}) {
		t.Fatalf("first run = %+v", r)
	}
	// Changed while its run is active: the run goes on, ticks are skipped.
	if err := sched.Set([]Spec{{Name: "a", Schedule: "@every 1s", Body: "v2"}}); err != nil {
		t.Fatal(err)
	}
	rec.await(t, "a", "run skipped: the previous run", 1)
	if s, _ := sched.Spec("a"); s.Body != "v2" {
		t.Errorf("spec after the change has body %q", s.Body)
	}
	close(release)
	if r := recv(t, runs, "a run of the changed spec"); r != (ran{"a", "v2"}) {
		t.Fatalf("run after the change = %+v", r)
	}

	// A bad schedule: reported, the current version stays scheduled.
	err = sched.Set([]Spec{{Name: "a", Path: "a.md", Schedule: "every second", Body: "v3"}})
	if err == nil || !strings.Contains(err.Error(), "a.md") {
		t.Fatalf("Set with a bad schedule = %v, want an error naming the file", err)
	}
	if s, ok := sched.Spec("a"); !ok || s.Body != "v2" {
		t.Errorf("spec after a bad change = %+v, %v; want v2 kept", s, ok)
	}
	for len(runs) > 0 {
		<-runs
	}
	if r := recv(t, runs, "a run after the bad change"); r != (ran{"a", "v2"}) {
		t.Fatalf("run after the bad change = %+v", r)
	}

	// Removed: no more runs (one already due may still start).
	if err := sched.Set(nil); err != nil {
		t.Fatal(err)
	}
	if e := sched.Entries(); len(e) != 0 {
		t.Errorf("entries after removal = %+v", e)
	}
	time.Sleep(100 * time.Millisecond)
	for len(runs) > 0 {
		<-runs
	}
	select {
	case r := <-runs:
		t.Fatalf("run %+v after the spec was removed", r)
	case <-time.After(2500 * time.Millisecond):
	}
}

// TestScheduledAtIsTheTickFired: instances that fire the same tick a little
// apart (or late) compute the same scheduled time, the store's key of the
// tick's one run.
func TestScheduledAtIsTheTickFired(t *testing.T) {
	every, err := cron.ParseStandard("@every 1s")
	if err != nil {
		t.Fatal(err)
	}
	minutely, err := cron.ParseStandard("*/5 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 26, 10, 15, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		sched cron.Schedule
		fired time.Time
		want  time.Time
	}{
		{"every second, on time", every, base.Add(3 * time.Millisecond), base},
		{"every second, 900ms late", every, base.Add(900 * time.Millisecond), base},
		{"every 5 minutes, on time", minutely, base.Add(time.Millisecond), base},
		{"every 5 minutes, 20s late", minutely, base.Add(20 * time.Second), base},
	} {
		if got := scheduledAt(tc.sched, tc.fired); !got.Equal(tc.want) {
			t.Errorf("%s: scheduledAt(%s) = %s, want %s", tc.name, tc.fired.Format(time.StampMilli), got.Format(time.StampMilli), tc.want.Format(time.StampMilli))
		}
	}
}
