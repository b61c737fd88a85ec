// Package daemon is `orchestrator serve`: the long-running process that
// runs specs on their schedules, takes up the runs a previous process left
// waiting or interrupted, and serves /healthz, /metrics and the surfaces'
// webhooks over HTTP.
//
// The daemon owns no run logic: it creates and drives runs through Runs
// (the runner), and leaves questions, surfaces and answers to it. What it
// adds is the process around them: one daemon per state directory, the
// scheduler with its no-overlap rule (a run waiting on a question counts as
// running), and a shutdown that leaves every run resumable.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/specs"
)

// Runs creates and drives runs. *runner.Runner satisfies it.
//
// Drive carries a run forward until it is final, or ctx ends (the run is
// then left interrupted or waiting, resumable), or it waits on a question
// nobody in this process can answer (runner.ErrWaiting). It fails at once
// with an error wrapping store.ErrLocked when another process drives the
// run. It is called from several goroutines at once, for different runs.
type Runs interface {
	Create(ctx context.Context, n runner.NewRun) (store.Run, error)
	Drive(ctx context.Context, runID string) (store.Run, error)
}

// Store is what the daemon reads and writes of the durable state.
// *store.Store satisfies it.
type Store interface {
	// ListRuns finds the runs to take up on start, and the runs that make
	// a spec busy.
	ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error)
	// LockDaemon takes the one daemon lock of the state directory.
	LockDaemon() (*store.Lock, error)
	// LastScheduled and MarkScheduled persist when a spec last started,
	// for catch-up and status.
	LastScheduled(ctx context.Context, spec string) (time.Time, bool, error)
	MarkScheduled(ctx context.Context, spec string, t time.Time) error
	// RunDriven reports whether some process holds a run's lock (drives
	// it), to adopt the active runs nobody drives.
	RunDriven(id string) (bool, error)
	// Shared reports a store several instances share (cluster.go); then
	// ClaimableRuns lists the runs to take, WaitChange waits for another
	// look, and Lead runs a function while this instance leads.
	Shared() bool
	ClaimableRuns(ctx context.Context, host string, limit int) ([]store.Run, error)
	WaitChange(ctx context.Context) error
	Lead(ctx context.Context, name string, retry time.Duration, fn func(ctx context.Context))
	// Heartbeat and LeaseTTL: this instance as `status` lists it.
	Heartbeat(ctx context.Context, started time.Time, leader bool, driving int) error
	Goodbye(ctx context.Context) error
	LeaseTTL() time.Duration
}

// Config is what a Daemon is made of.
type Config struct {
	// Specs are run on their schedules (those without one only by hand,
	// elsewhere). Not with SpecsDir.
	Specs []specs.Spec
	// SpecsDir is the specs folder the daemon follows: its specs are run
	// on their schedules, and added, changed and removed files take
	// effect within RescanEvery, without a restart. A file that stops
	// validating (Parse, then CheckSpec) keeps its last good version
	// scheduled, and is reported in the log, /healthz (spec_problems,
	// status "degraded") and orchestrator_spec_problems until it is fixed.
	// A folder that does not exist holds no specs (the daemon drives the
	// store's runs and questions only) and is picked up when it appears.
	// At start, a spec that does not validate is an error of New.
	SpecsDir string
	// CheckSpec refuses a parsed spec of SpecsDir the configuration does
	// not run (a schedule below serve.min_schedule_interval, …); optional.
	CheckSpec func(specs.Spec) error
	// RescanEvery is how often SpecsDir is read again; default 2s.
	RescanEvery time.Duration
	Runs        Runs
	Store       Store
	// Asks asks the waiting runs' questions, on the instance that leads
	// (cluster.go); required when Store is shared. Default: Runs, when it
	// is an Asker (the runner is); without it nobody is asked.
	Asks Asker
	// NewRun maps a spec to the run to create when it is due; text is the
	// spec file's content the spec was parsed from (nil for Specs).
	// Required with Specs or SpecsDir. The run's Spec is set to the spec's
	// name when left empty. An error skips the tick, logged.
	NewRun func(sp specs.Spec, text []byte) (runner.NewRun, error)
	// Listen is the HTTP address (serve.listen), such as "127.0.0.1:8080"
	// or "127.0.0.1:0"; empty serves no HTTP.
	Listen string
	// MaxConcurrent limits the scheduled runs active at once
	// (serve.max_concurrent_runs); 0 means no limit. Runs taken up from
	// the store on start do not count against it. On a shared store it
	// also bounds the runs this instance claims: it claims while it
	// drives fewer.
	MaxConcurrent int
	// CatchUp is specs.CatchUpSkip (default) or specs.CatchUpOnce
	// (serve.catch_up).
	CatchUp string
	// Handlers are served next to /healthz and /metrics, by
	// http.ServeMux pattern, e.g. "/webhooks/github" → the GitHub
	// surface's webhook handler.
	Handlers map[string]http.Handler
	// SurfaceHealth, if set, says which surfaces' services do not serve
	// them now: /healthz lists them (surface_problems, status "degraded")
	// and orchestrator_surface_up is 0 for them.
	SurfaceHealth SurfaceHealthFunc
	// Metrics is served on /metrics; nil makes a new one (whose counters
	// see no runner events).
	Metrics *Metrics
	// Logger defaults to a logger that discards.
	Logger *slog.Logger
	// ShutdownTimeout bounds how long shutdown waits for the runs to
	// stop; default 30s.
	ShutdownTimeout time.Duration
	// Location is where schedules without CRON_TZ=/TZ= are read; default
	// time.Local.
	Location *time.Location
	// CapSkip, when set, says why a tick of sp starts no run ("" when it
	// may): the spec is past a spend cap it asked about already this
	// period (runner.CapSkip), so a schedule asks once per cap period,
	// not once per tick. Such a tick is logged as skipped by the cap.
	CapSkip func(ctx context.Context, sp specs.Spec) (string, error)
	// AdoptEvery is how often the daemon looks for active runs no process
	// drives (a `run` that exited with its question waiting, a `resume`
	// that was stopped, a process that died) and drives them, so that
	// `orchestrator answer` always leads to a resume while a daemon runs;
	// default 5s.
	AdoptEvery time.Duration
	// PauseAfterFailures pauses a scheduled spec's schedule once that many
	// of its runs failed in a row (a spec's pause_after_failures wins);
	// 0 means DefaultPauseAfterFailures, negative never (schedhealth.go).
	PauseAfterFailures int
	// Notice tells a spec's schedule paused itself, or that ticks started
	// no run (at most once a day); optional (schedhealth.go).
	Notice func(ctx context.Context, n ScheduleNotice)
}

// maxDriveBackoff bounds the wait (before its jitter) before driving again
// a run whose drive stopped on an error.
const maxDriveBackoff = 5 * time.Minute

// Daemon is `orchestrator serve`. Run it once.
type Daemon struct {
	cfg   Config
	log   *slog.Logger
	sched *specs.Scheduler
	mux   *http.ServeMux
	ready chan struct{}

	mu       sync.Mutex
	started  bool
	stopping bool
	addr     string
	driving  map[string]string // run ID → spec name, for the runs driven here
	bySpec   map[string]int    // spec name → runs of it driven here
	wg       sync.WaitGroup    // drivers
	failed   map[string]again  // run ID → when to drive again a run whose drive failed
	undriven []string          // active runs no process drove at the last look
	leader   bool              // this instance leads (cluster.go)
	lookedUp bool              // the claim loop looked once (SQLite: took up what was left)
	store    *storeHealth      // the store's reachability as the loops find it (outage.go)

	specDir      *specDir              // nil without SpecsDir; used by New, then by the rescan loop
	specTexts    map[string]loadedSpec // spec name → the version scheduled, with its text
	specProblems []SpecProblem         // of the last rescan
}

type again struct {
	n  int
	at time.Time
}

// New checks cfg and returns a Daemon; every problem of the specs'
// schedules and options is reported together.
func New(cfg Config) (*Daemon, error) {
	var errs []error
	if cfg.Runs == nil {
		errs = append(errs, errors.New("no Runs"))
	}
	if cfg.Store == nil {
		errs = append(errs, errors.New("no Store"))
	}
	if a, ok := cfg.Runs.(Asker); ok && cfg.Asks == nil {
		cfg.Asks = a // the runner asks the waiting runs' questions too
	}
	if cfg.Store != nil && cfg.Store.Shared() && cfg.Asks == nil {
		errs = append(errs, errors.New("a shared store and no Asks"))
	}
	if (len(cfg.Specs) > 0 || cfg.SpecsDir != "") && cfg.NewRun == nil {
		errs = append(errs, errors.New("no NewRun for the specs"))
	}
	if len(cfg.Specs) > 0 && cfg.SpecsDir != "" {
		errs = append(errs, errors.New("both Specs and SpecsDir: give one"))
	}
	if cfg.RescanEvery <= 0 {
		cfg.RescanEvery = 2 * time.Second
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.SurfaceHealth != nil {
		cfg.Metrics.SetSurfaceHealth(cfg.SurfaceHealth)
	}
	var health HealthStore // schedhealth.go: its metrics, once d is made
	if h, ok := cfg.Store.(HealthStore); ok {
		health = h
	}
	if cfg.AdoptEvery <= 0 {
		cfg.AdoptEvery = 5 * time.Second
	}
	d := &Daemon{
		cfg:     cfg,
		log:     cfg.Logger,
		ready:   make(chan struct{}),
		driving: map[string]string{},
		bySpec:  map[string]int{},
		failed:  map[string]again{},
		store:   &storeHealth{log: cfg.Logger, now: time.Now},
	}
	if health != nil {
		cfg.Metrics.watchHealth(health, d.scheduledSpecs)
	}
	initial := cfg.Specs
	if cfg.SpecsDir != "" {
		d.specDir = newSpecDir(cfg.SpecsDir, cfg.CheckSpec, cfg.Logger)
		list, _ := d.specDir.scan()
		if err := d.specDir.err(); err != nil {
			errs = append(errs, fmt.Errorf("specs in %s: %w", cfg.SpecsDir, err))
		}
		initial = d.useSpecs(list)
		d.specDir.report()
	}
	mux, err := d.routes()
	if err != nil {
		errs = append(errs, err)
	}
	d.mux = mux
	if cfg.Store != nil {
		sched, err := specs.NewScheduler(initial, d.runSpec, specs.SchedulerOptions{
			MaxConcurrent: cfg.MaxConcurrent,
			CatchUp:       cfg.CatchUp,
			Busy:          d.busy,
			LastRun:       d.lastRun,
			MarkRun:       d.markRun,
			Paused:        d.paused,
			Skipped:       d.skipped,
			Logger:        cfg.Logger,
			Location:      cfg.Location,
		})
		if err != nil {
			errs = append(errs, err)
		}
		d.sched = sched
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("daemon: %w", errors.Join(errs...))
	}
	return d, nil
}

// Ready is closed once Run holds the lock, listens, has taken up the stored
// runs and started the scheduler.
func (d *Daemon) Ready() <-chan struct{} { return d.ready }

// Running returns the IDs of the runs this daemon drives now, sorted.
func (d *Daemon) Running() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.driving))
	for id := range d.driving {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Run is the daemon: it takes the daemon lock of the state directory (a
// second daemon fails at once), listens on Listen, drives on every waiting,
// interrupted or orphaned run of the store, runs the specs on their
// schedules and serves HTTP, until ctx ends. Then it stops scheduling,
// cancels the runs (the runner leaves them resumable: a running turn
// interrupted, a question pending), waits for them up to ShutdownTimeout,
// shuts the HTTP server down and releases the lock. It returns nil after a
// clean shutdown.
func (d *Daemon) Run(ctx context.Context) (err error) {
	d.mu.Lock()
	if d.started {
		d.mu.Unlock()
		return errors.New("serve: the daemon was already run")
	}
	d.started = true
	d.mu.Unlock()

	lock, err := d.cfg.Store.LockDaemon()
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			return fmt.Errorf("serve: another `orchestrator serve` uses this state directory: %w", err)
		}
		return fmt.Errorf("serve: %w", err)
	}
	defer func() {
		if uerr := lock.Unlock(); uerr != nil && err == nil {
			err = fmt.Errorf("serve: release the daemon lock: %w", uerr)
		}
	}()

	var ln net.Listener
	if d.cfg.Listen != "" {
		var lc net.ListenConfig
		ln, err = lc.Listen(ctx, "tcp", d.cfg.Listen)
		if err != nil {
			return fmt.Errorf("serve: listen on %s: %w", d.cfg.Listen, err)
		}
		ln = guardFiles(ln, d.log) // 503, not a hang, when out of descriptors (files.go)
		d.mu.Lock()
		d.addr = ln.Addr().String()
		d.mu.Unlock()
	}

	// The runs stop when shutdown says so (after /healthz turned to
	// "shutting down"), not directly with ctx.
	runsCtx, cancelRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRuns()

	if !d.cfg.Store.Shared() {
		// The one daemon of the state directory: it takes up what the
		// previous one left before it schedules anything.
		d.claim(runsCtx)
		d.setLeader(true)
	}
	d.sched.Start(runsCtx)
	adopting := make(chan struct{})
	go func() {
		defer close(adopting)
		d.clusterLoops(runsCtx)
	}()
	defer func() { <-adopting }()
	if d.specDir != nil {
		rescanning := make(chan struct{})
		go func() {
			defer close(rescanning)
			d.rescanLoop(runsCtx)
		}()
		defer func() { <-rescanning }()
	}

	srvErr := make(chan error, 1)
	var srv *http.Server
	if ln != nil {
		srv = &http.Server{
			Handler:           d.mux,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
			BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		}
		go func() { srvErr <- srv.Serve(ln) }()
		d.log.Info("serving", "addr", d.addr, "specs", d.sched.Len())
	} else {
		d.log.Info("serving without HTTP", "specs", d.sched.Len())
	}
	close(d.ready)

	var runErr error
	select {
	case <-ctx.Done():
		d.log.Info("shutting down: stopping the scheduler and the runs; they stay resumable")
	case err := <-srvErr:
		runErr = fmt.Errorf("serve: http: %w", err)
		d.log.Error("http server failed; shutting down", "err", err)
		srv = nil
	}
	return errors.Join(runErr, d.shutdown(cancelRuns, srv))
}

// shutdown stops scheduling, cancels the runs, waits for them (bounded) and
// shuts the HTTP server down.
func (d *Daemon) shutdown(cancelRuns context.CancelFunc, srv *http.Server) error {
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()

	cancelRuns()
	schedDone := d.sched.Stop()
	drivers := make(chan struct{})
	go func() {
		// The scheduler's runs first: once they returned, nothing
		// registers a driver any more.
		<-schedDone.Done()
		d.wg.Wait()
		close(drivers)
	}()
	var errs []error
	timer := time.NewTimer(d.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-drivers:
		d.log.Info("every run stopped")
	case <-timer.C:
		left := d.Running()
		d.log.Error("runs did not stop in time", "timeout", d.cfg.ShutdownTimeout, "runs", left)
		errs = append(errs, fmt.Errorf("serve: %d run(s) did not stop within %s: %s",
			len(left), d.cfg.ShutdownTimeout, strings.Join(left, ", ")))
	}
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), httpGrace)
		defer cancel()
		switch err := srv.Shutdown(ctx); {
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded):
			// A request still open after the grace is a long-lived one (a
			// browser's live run view, a slow client): closing it is the
			// normal end of serving, not a failure.
			d.log.Info("closing the HTTP connections still open", "grace", httpGrace)
			srv.Close()
		default:
			srv.Close()
			errs = append(errs, fmt.Errorf("serve: http shutdown: %w", err))
		}
	}
	return errors.Join(errs...)
}

// runSpec is the scheduler's run function: create a run of the spec and
// drive it. It returns once the run is final, left waiting, or stopped by
// the shutdown, so the scheduler skips the spec's ticks meanwhile.
func (d *Daemon) runSpec(ctx context.Context, sp specs.Spec) error {
	if d.cfg.CapSkip != nil {
		why, err := d.cfg.CapSkip(ctx, sp)
		if err != nil {
			return fmt.Errorf("spec %s: read its spend caps: %w", sp.Name, err)
		}
		if why != "" {
			d.log.Info("tick skipped by a spend cap", "spec", sp.Name, "why", why)
			d.skipped(sp.Name, store.SkipCap, 1, time.Now()) // status, metrics, a notice once a day
			return nil
		}
	}
	var text []byte
	d.mu.Lock()
	if l, ok := d.specTexts[sp.Name]; ok && reflect.DeepEqual(l.spec, sp) {
		text = l.text
	}
	d.mu.Unlock()
	n, err := d.cfg.NewRun(sp, text)
	if err != nil {
		return fmt.Errorf("spec %s: %w", sp.Name, err)
	}
	if n.Spec == "" {
		n.Spec = sp.Name
	}
	if t, ok := specs.TickOf(ctx); ok {
		n.Tick = t
	}
	run, err := d.cfg.Runs.Create(ctx, n)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, store.ErrTickTaken) {
			d.log.Info("tick skipped: another instance made its run", "spec", sp.Name, "tick", n.Tick)
			return nil
		}
		return fmt.Errorf("create run of spec %s: %w", sp.Name, err)
	}
	if !d.register(run.ID, sp.Name) {
		d.mu.Lock()
		stopping := d.stopping
		d.mu.Unlock()
		if stopping {
			return nil // created as the shutdown began: the next daemon takes it up
		}
		return fmt.Errorf("run %s of spec %s is driven already", run.ID, sp.Name)
	}
	d.log.Info("run created", "run", run.ID, "spec", sp.Name)
	return d.drive(ctx, run.ID, sp.Name, "schedule")
}

// busy says whether a run of the spec is driven here, or is running or
// waiting on a question in the store (driven by another process, or left
// waiting): the scheduler then skips the spec's tick. A store error counts
// as busy.
func (d *Daemon) busy(spec string) bool {
	d.mu.Lock()
	n := d.bySpec[spec]
	d.mu.Unlock()
	if n > 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	runs, err := d.cfg.Store.ListRuns(ctx, store.RunFilter{Spec: spec, Status: []store.RunStatus{store.RunQueued, store.RunRunning, store.RunWaiting}, Limit: 1})
	if err != nil {
		d.log.Error("tick skipped: cannot tell whether the spec has an active run", "spec", spec, "err", err)
		return true
	}
	if len(runs) > 0 {
		d.log.Debug("spec has an active run in the store", "spec", spec, "run", runs[0].ID, "status", runs[0].Status)
		return true
	}
	return false
}

func (d *Daemon) lastRun(spec string) (time.Time, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	t, ok, err := d.cfg.Store.LastScheduled(ctx, spec)
	if err != nil {
		d.log.Error("read when the spec last ran", "spec", spec, "err", err)
		return time.Time{}, false
	}
	return t, ok
}

func (d *Daemon) markRun(spec string, at time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := d.cfg.Store.MarkScheduled(ctx, spec, at); err != nil {
		d.log.Error("record when the spec ran", "spec", spec, "err", err)
	}
}
