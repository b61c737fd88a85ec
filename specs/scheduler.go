package specs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// Catch-up policies for ticks missed while the daemon was down.
const (
	CatchUpSkip = "skip"
	CatchUpOnce = "once"
)

var (
	// ErrBusy is why a run is not started: a run of the spec is already
	// active or waiting on a question.
	ErrBusy = errors.New("a run of this spec is still active")
	// ErrStopped is why a run is not started after Stop.
	ErrStopped = errors.New("scheduler stopped")
)

// SchedulerOptions are the settings of a Scheduler; the zero value is usable.
type SchedulerOptions struct {
	// MaxConcurrent limits the runs active at once across all specs
	// (serve.max_concurrent_runs); 0 means no limit. A run due while the
	// limit is reached waits for a free slot (its spec counts as running
	// meanwhile, so its later ticks are skipped).
	MaxConcurrent int
	// CatchUp is CatchUpSkip (the default when empty) or CatchUpOnce: on
	// Start, a scheduled spec whose LastRun is before its latest scheduled
	// time runs once right away. A spec with no LastRun has missed nothing.
	CatchUp string
	// Busy reports whether a run of the spec is active or waiting on a
	// question outside the scheduler (taken up from the store after a
	// restart); such a spec's ticks are skipped. Optional. It is called
	// without the scheduler's lock held.
	Busy func(specName string) bool
	// LastRun returns when a run of the spec last started, as persisted
	// by MarkRun. Optional; called by NewScheduler and by Start (for
	// catch-up).
	LastRun func(specName string) (time.Time, bool)
	// MarkRun is called when a run starts (from a tick, catch-up or
	// by hand in tests), to persist the time for LastRun. Optional.
	MarkRun func(specName string, at time.Time)
	// Paused reports whether the spec's schedule is paused (by hand, or
	// after its runs failed): its ticks and catch-up start no run. It is
	// read at every tick, so a pause made elsewhere (another instance of a
	// shared store) holds from the next tick. Optional; called without
	// the scheduler's lock held.
	Paused func(specName string) bool
	// Skipped is told of ticks that started no run, n of them for reason
	// ("missed": no scheduler ran at them, found at Start; "busy": the
	// previous run still ran or waited), the latest at last. Optional;
	// called without the scheduler's lock held.
	Skipped func(specName, reason string, n int64, last time.Time)
	// Logger defaults to a logger that discards.
	Logger *slog.Logger
	// Location is where schedules without CRON_TZ=/TZ= are read; default
	// time.Local.
	Location *time.Location
	// Now is the clock for catch-up and MarkRun (and tests);
	// default time.Now. The ticks themselves follow the real clock.
	Now func() time.Time
}

// Scheduler runs specs on their schedules with robfig/cron, at most one run
// per spec at a time and at most MaxConcurrent at once.
//
// A run is run(ctx, spec) with the ctx given to Start (ticks and catch-up).
// A panicking run is logged and counts as failed; the scheduler goes on.
type Scheduler struct {
	run   func(ctx context.Context, s Spec) error
	opts  SchedulerOptions
	log   *slog.Logger
	loc   *time.Location
	cron  *cron.Cron
	jobs  map[string]*job
	order []string
	sem   chan struct{} // nil: no limit

	mu       sync.Mutex
	ctx      context.Context
	started  bool
	stopped  bool
	stopCh   chan struct{}
	stopDone context.Context
	wg       sync.WaitGroup
}

// job is a spec of the scheduler. Its name never changes; spec, sched and
// entry are replaced by Set, under Scheduler.mu.
type job struct {
	name    string
	spec    Spec
	sched   cron.Schedule // nil: by hand only
	entry   cron.EntryID  // the cron entry of sched; 0 when none
	running bool          // guarded by Scheduler.mu
	prev    time.Time     // guarded by Scheduler.mu
}

// NewScheduler returns a scheduler for specs; specs without a schedule can
// never be run by it. Every bad schedule, duplicate name and bad option
// is reported together.
func NewScheduler(specs []Spec, run func(ctx context.Context, s Spec) error, opts SchedulerOptions) (*Scheduler, error) {
	if run == nil {
		return nil, errors.New("new scheduler: no run function")
	}
	var errs Errors
	switch opts.CatchUp {
	case "", CatchUpSkip, CatchUpOnce:
	default:
		errs = append(errs, problem("", 0, "serve.catch_up", fmt.Sprintf("unknown policy %q (known: %s, %s)", opts.CatchUp, CatchUpSkip, CatchUpOnce)))
	}
	if opts.MaxConcurrent < 0 {
		errs = append(errs, problem("", 0, "serve.max_concurrent_runs", fmt.Sprintf("must not be negative, not %d", opts.MaxConcurrent)))
	}
	s := &Scheduler{
		run:    run,
		opts:   opts,
		log:    opts.Logger,
		loc:    opts.Location,
		jobs:   map[string]*job{},
		stopCh: make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.loc == nil {
		s.loc = time.Local
	}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	if opts.MaxConcurrent > 0 {
		s.sem = make(chan struct{}, opts.MaxConcurrent)
	}
	cl := cronLogger{s.log}
	s.cron = cron.New(
		cron.WithLocation(s.loc),
		cron.WithParser(cronParser),
		cron.WithLogger(cl),
		cron.WithChain(cron.Recover(cl)),
	)
	for _, sp := range specs {
		if _, dup := s.jobs[sp.Name]; dup {
			errs = append(errs, problem(sp.Path, sp.Line("name"), "name", fmt.Sprintf("spec name %q is used twice", sp.Name)))
			continue
		}
		sched, perr := parseJobSchedule(sp)
		if perr != nil {
			errs = append(errs, perr)
			continue
		}
		j := &job{name: sp.Name, spec: sp}
		if opts.LastRun != nil {
			if last, ok := opts.LastRun(sp.Name); ok {
				j.prev = last
			}
		}
		s.schedule(j, sched)
		s.jobs[sp.Name] = j
		s.order = append(s.order, sp.Name)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return s, nil
}

// parseJobSchedule parses the schedule of sp; nil for a spec without one.
func parseJobSchedule(sp Spec) (cron.Schedule, *Error) {
	if sp.Schedule == "" {
		return nil, nil
	}
	sched, err := ParseSchedule(sp.Schedule)
	if err != nil {
		return nil, problem(sp.Path, sp.Line("schedule"), "schedule", err.Error())
	}
	return sched, nil
}

// schedule replaces j's cron entry by one for sched (none when nil).
// Called with s.mu held, or before the scheduler is shared.
func (s *Scheduler) schedule(j *job, sched cron.Schedule) {
	if j.entry != 0 {
		s.cron.Remove(j.entry)
		j.entry = 0
	}
	j.sched = sched
	if sched != nil {
		name := j.name
		j.entry = s.cron.Schedule(sched, cron.FuncJob(func() { s.tick(name) }))
	}
}

// Set makes list the scheduler's specs, while it runs: a spec not in list
// any more is no longer scheduled, a new one is, and a changed one is
// scheduled with its new version from its next tick (the schedule's next
// time is computed afresh). A run that is active goes on with the version
// it started with, and its spec's ticks are skipped until it returns, also
// across a change. A spec with a bad schedule or a name used twice is
// left out of list and reported in the error (the spec of that name keeps
// its current version); the others are applied. No catch-up runs for the
// specs added.
func (s *Scheduler) Set(list []Spec) error {
	var errs Errors
	type entry struct {
		sp    Spec
		sched cron.Schedule
		last  time.Time
	}
	var next []entry
	seen := map[string]bool{}
	for _, sp := range list {
		if seen[sp.Name] {
			errs = append(errs, problem(sp.Path, sp.Line("name"), "name", fmt.Sprintf("spec name %q is used twice", sp.Name)))
			continue
		}
		sched, perr := parseJobSchedule(sp)
		if perr != nil {
			errs = append(errs, perr)
			s.mu.Lock()
			_, known := s.jobs[sp.Name]
			s.mu.Unlock()
			if known {
				seen[sp.Name] = true // keep the current version
			}
			continue
		}
		seen[sp.Name] = true
		e := entry{sp: sp, sched: sched}
		s.mu.Lock()
		_, known := s.jobs[sp.Name]
		s.mu.Unlock()
		if !known && s.opts.LastRun != nil { // a store read: not under s.mu
			e.last, _ = s.opts.LastRun(sp.Name)
		}
		next = append(next, e)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for name, j := range s.jobs {
		if seen[name] {
			continue
		}
		s.schedule(j, nil)
		delete(s.jobs, name)
		s.log.Info("spec removed", "spec", name)
	}
	order := make([]string, 0, len(seen))
	for _, e := range next {
		name := e.sp.Name
		order = append(order, name)
		j, ok := s.jobs[name]
		switch {
		case !ok:
			j = &job{name: name, spec: e.sp, prev: e.last}
			s.schedule(j, e.sched)
			s.jobs[name] = j
			s.log.Info("spec added", "spec", name, "schedule", e.sp.Schedule, "file", e.sp.Path)
		case !reflect.DeepEqual(j.spec, e.sp):
			j.spec = e.sp
			s.schedule(j, e.sched)
			s.log.Info("spec changed", "spec", name, "schedule", e.sp.Schedule, "file", e.sp.Path)
		}
	}
	// The specs kept at their current version (a bad new schedule) keep
	// their place at the end.
	for _, name := range s.order {
		if seen[name] && !slices.Contains(order, name) {
			order = append(order, name)
		}
	}
	s.order = order
	return errs.Err()
}

// Len is the number of specs scheduled.
func (s *Scheduler) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs)
}

// Start starts scheduling; ticks run with ctx, and when ctx ends the
// scheduler stops as by Stop. With CatchUpOnce, the specs that missed a tick
// start right away. Start after Start or Stop does nothing.
func (s *Scheduler) Start(ctx context.Context) {
	s.mu.Lock()
	if s.started || s.stopped {
		s.mu.Unlock()
		s.log.Warn("scheduler already started or stopped")
		return
	}
	s.started = true
	s.ctx = ctx
	s.mu.Unlock()

	s.catchUp(ctx)
	s.cron.Start()
	go func() {
		select {
		case <-ctx.Done():
			s.Stop()
		case <-s.stopCh:
		}
	}()
}

func (s *Scheduler) catchUp(ctx context.Context) {
	if s.opts.LastRun == nil {
		return
	}
	now := s.now()
	s.mu.Lock()
	jobs := make([]*job, 0, len(s.order))
	for _, name := range s.order {
		jobs = append(jobs, s.jobs[name])
	}
	s.mu.Unlock()
	for _, j := range jobs {
		name := j.name
		last, ok := s.opts.LastRun(name)
		if !ok {
			continue
		}
		s.mu.Lock()
		if last.After(j.prev) {
			j.prev = last
		}
		sched := j.sched
		s.mu.Unlock()
		if sched == nil {
			continue
		}
		missed := sched.Next(last)
		if missed.IsZero() || missed.After(now) {
			continue
		}
		if s.paused(name) {
			s.log.Info("spec missed a scheduled run; its schedule is paused", "spec", name, "last_run", last, "missed", missed)
			continue
		}
		n, latest := countMissed(sched, last, now)
		if s.opts.CatchUp != CatchUpOnce {
			s.log.Info("spec missed a scheduled run; catch_up is skip", "spec", name, "last_run", last, "missed", missed, "ticks", n)
			s.skipped(name, SkipMissed, n, latest)
			continue
		}
		if n > 1 {
			s.skipped(name, SkipMissed, n-1, latest) // one of them runs now
		}
		s.log.Info("spec missed a scheduled run; catching up once", "spec", name, "last_run", last, "missed", missed)
		if s.claim(j, "catch-up") != nil {
			continue
		}
		go func() { _ = s.execute(withTick(ctx, missed), j, "catch-up") }()
	}
}

// Stop stops scheduling: no new run starts, and runs waiting for a free slot
// give up. Running jobs are not interrupted (cancel the ctx given to Start
// for that); the returned context is done once every run started by the
// scheduler (ticks, catch-up) has returned. Stop may be
// called more than once.
func (s *Scheduler) Stop() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return s.stopDone
	}
	s.stopped = true
	close(s.stopCh)
	cronDone := s.cron.Stop()
	done, cancel := context.WithCancel(context.Background())
	s.stopDone = done
	go func() {
		<-cronDone.Done()
		s.wg.Wait()
		cancel()
	}()
	return done
}

func (s *Scheduler) now() time.Time { return s.opts.Now().In(s.loc) }

// tick is the cron job of a spec.
func (s *Scheduler) tick(name string) {
	s.mu.Lock()
	ctx := s.ctx
	j, ok := s.jobs[name]
	s.mu.Unlock()
	if !ok {
		return // removed by Set since
	}
	if s.paused(name) {
		s.log.Info("tick skipped: the spec's schedule is paused", "spec", name)
		return
	}
	s.mu.Lock()
	sched := j.sched
	s.mu.Unlock()
	var at time.Time
	if sched != nil {
		at = scheduledAt(sched, s.now())
	}
	if err := s.claim(j, "schedule"); err != nil {
		if errors.Is(err, ErrBusy) {
			s.skipped(name, SkipBusy, 1, at)
		}
		return
	}
	if sched != nil {
		ctx = withTick(ctx, at)
	}
	_ = s.execute(ctx, j, "schedule")
}

// Reasons of a skipped tick (SchedulerOptions.Skipped).
const (
	SkipMissed = "missed"
	SkipBusy   = "busy"
)

// maxMissedCount bounds the ticks countMissed counts (a schedule of every
// second left for a year).
const maxMissedCount = 100_000

// countMissed counts sched's ticks after last up to now, and returns the
// latest of them.
func countMissed(sched cron.Schedule, last, now time.Time) (int64, time.Time) {
	var n int64
	var latest time.Time
	for t := sched.Next(last); !t.IsZero() && !t.After(now) && n < maxMissedCount; t = sched.Next(t) {
		n++
		latest = t
	}
	return n, latest
}

func (s *Scheduler) paused(name string) bool {
	return s.opts.Paused != nil && s.opts.Paused(name)
}

func (s *Scheduler) skipped(name, reason string, n int64, last time.Time) {
	if s.opts.Skipped != nil && n > 0 {
		s.opts.Skipped(name, reason, n, last)
	}
}

type tickKey struct{}

func withTick(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, tickKey{}, t)
}

// TickOf returns the scheduled time of the tick (or the missed tick a
// catch-up runs for) that the run function was called for; ok is false
// outside the scheduler. Every instance sharing a store computes the same
// time for the same tick, whatever its clock's small drift or its cron's
// delay in firing: the store makes one run per spec and tick.
func TickOf(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(tickKey{}).(time.Time)
	return t, ok && !t.IsZero()
}

// scheduledAt is the latest time of sched at or before fired (within the
// minute before it): the tick cron fired for. Schedules have whole seconds,
// so the instances that fire the same tick a little late agree on it.
func scheduledAt(sched cron.Schedule, fired time.Time) time.Time {
	var last time.Time
	t := fired.Add(-time.Minute)
	for i := 0; i < 120; i++ {
		n := sched.Next(t)
		if n.IsZero() || n.After(fired) {
			break
		}
		last, t = n, n
	}
	if last.IsZero() {
		return fired.Truncate(time.Second)
	}
	return last
}

// claim marks j running, unless the scheduler is stopped (ErrStopped), or a
// run of the spec is running already or Busy says so (ErrBusy); a refused
// claim is logged. A successful claim must be followed by execute.
func (s *Scheduler) claim(j *job, trigger string) error {
	name := j.name
	check := func() error {
		switch {
		case s.stopped:
			s.log.Info("run not started: scheduler stopped", "spec", name, "trigger", trigger)
			return ErrStopped
		case j.running:
			s.log.Info("run skipped: the previous run of the spec is still active", "spec", name, "trigger", trigger)
			return ErrBusy
		}
		return nil
	}
	s.mu.Lock()
	err := check()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if s.opts.Busy != nil && s.opts.Busy(name) {
		s.log.Info("run skipped: a run of the spec is active or waiting on a question", "spec", name, "trigger", trigger)
		return ErrBusy
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := check(); err != nil {
		return err
	}
	j.running = true
	s.wg.Add(1)
	return nil
}

// execute runs a claimed job: waits for a slot, marks the run, calls run
// with panics recovered, and releases the claim.
func (s *Scheduler) execute(ctx context.Context, j *job, trigger string) (err error) {
	name := j.name
	defer func() {
		s.mu.Lock()
		j.running = false
		s.mu.Unlock()
		s.wg.Done()
	}()
	if s.sem != nil {
		select {
		case s.sem <- struct{}{}:
		default:
			s.log.Info("run waiting for a free slot: max_concurrent_runs reached", "spec", name, "trigger", trigger, "max", cap(s.sem))
			select {
			case s.sem <- struct{}{}:
			case <-ctx.Done():
				return fmt.Errorf("run %s: %w", name, ctx.Err())
			case <-s.stopCh:
				return fmt.Errorf("run %s: %w", name, ErrStopped)
			}
		}
		defer func() { <-s.sem }()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("run %s: %w", name, err)
	}
	at := s.now()
	s.mu.Lock()
	j.prev = at
	sp := j.spec // the version this run starts with, whatever Set does meanwhile
	s.mu.Unlock()
	if s.opts.MarkRun != nil {
		s.opts.MarkRun(name, at)
	}
	s.log.Info("run started", "spec", name, "trigger", trigger)
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("run %s: panic: %v", name, r)
			s.log.Error("run panicked", "spec", name, "trigger", trigger, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	err = s.run(ctx, sp)
	if err != nil {
		s.log.Warn("run failed", "spec", name, "trigger", trigger, "duration", time.Since(start), "err", err)
	} else {
		s.log.Info("run finished", "spec", name, "trigger", trigger, "duration", time.Since(start))
	}
	return err
}

// cronLogger sends robfig/cron's logs to slog; its routine messages are Debug.
type cronLogger struct{ l *slog.Logger }

func (c cronLogger) Info(msg string, kv ...any) { c.l.Debug("cron: "+msg, kv...) }
func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Error("cron: "+msg, append([]any{"err", err}, kv...)...)
}
