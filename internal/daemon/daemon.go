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
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/retry"
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
	// Asks asks the waiting runs' questions on a shared store, on the
	// instance that leads (cluster.go); required when Store is shared.
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
	// AdoptEvery is how often the daemon looks for active runs no process
	// drives (a `run` that exited with its question waiting, a `resume`
	// that was stopped, a process that died) and drives them, so that
	// `orchestrator answer` always leads to a resume while a daemon runs;
	// default 5s.
	AdoptEvery time.Duration
}

// orphanGrace is how long a run in status running may go without an update
// before the daemon adopts it when no process drives it: a process that just
// created a run takes its lock right after.
const orphanGrace = time.Minute

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

// routes builds the HTTP handler; a bad or clashing pattern of Handlers is
// an error (http.ServeMux panics on them).
func (d *Daemon) routes() (mux *http.ServeMux, err error) {
	mux = http.NewServeMux()
	var pattern string
	defer func() {
		if r := recover(); r != nil {
			mux, err = nil, fmt.Errorf("handler %q: %v", pattern, r)
		}
	}()
	pattern = "/healthz"
	mux.HandleFunc(pattern, d.healthz)
	pattern = "/statusz"
	mux.HandleFunc(pattern, d.statusz)
	pattern = "/metrics"
	mux.Handle(pattern, d.cfg.Metrics.Handler())
	patterns := make([]string, 0, len(d.cfg.Handlers))
	for p := range d.cfg.Handlers {
		patterns = append(patterns, p)
	}
	sort.Strings(patterns)
	for _, p := range patterns {
		pattern = p
		h := d.cfg.Handlers[p]
		if h == nil {
			return nil, fmt.Errorf("handler %q: nil", p)
		}
		mux.Handle(p, h)
	}
	return mux, nil
}

// Handler is the daemon's HTTP handler: /healthz, /statusz, /metrics and
// Handlers.
func (d *Daemon) Handler() http.Handler { return d.mux }

// Addr is the address the HTTP server listens on, once Ready; empty before,
// or when Listen is empty.
func (d *Daemon) Addr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addr
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

// takeUp are the statuses of the runs a starting daemon drives on: those
// queued by `orchestrator submit`, those waiting on a question, those
// interrupted by a shutdown, and those left running by a process that died
// (a run another process still drives is locked, and skipped).
var takeUp = []store.RunStatus{store.RunQueued, store.RunWaiting, store.RunInterrupted, store.RunRunning}

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
		d.mu.Lock()
		d.addr = ln.Addr().String()
		d.mu.Unlock()
	}

	// The runs stop when shutdown says so (after /healthz turned to
	// "shutting down"), not directly with ctx.
	runsCtx, cancelRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRuns()

	shared := d.cfg.Store.Shared()
	if !shared {
		if err := d.takeUpRuns(runsCtx); err != nil {
			if ln != nil {
				ln.Close()
			}
			return err
		}
		d.setLeader(true) // the one daemon of the state directory
	}
	d.sched.Start(runsCtx)
	adopting := make(chan struct{})
	go func() {
		defer close(adopting)
		if shared {
			d.clusterLoops(runsCtx)
		} else {
			d.adoptLoop(runsCtx)
		}
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

// httpGrace is how long shutdown lets open HTTP requests finish before it
// closes their connections.
const httpGrace = 2 * time.Second

// takeUpRuns drives, each in its own goroutine, every run a previous
// process left waiting, interrupted or running.
func (d *Daemon) takeUpRuns(ctx context.Context) error {
	runs, err := d.cfg.Store.ListRuns(ctx, store.RunFilter{Status: takeUp})
	if err != nil {
		return fmt.Errorf("serve: find runs to take up: %w", err)
	}
	// Oldest first.
	for i := len(runs) - 1; i >= 0; i-- {
		run := runs[i]
		if !d.register(run.ID, run.Spec) {
			continue
		}
		d.log.Info("taking up run", "run", run.ID, "spec", run.Spec, "status", run.Status)
		go func() { _ = d.drive(ctx, run.ID, run.Spec, "take-up") }()
	}
	return nil
}

// adoptLoop adopts, every AdoptEvery, the active runs no process drives,
// until ctx ends.
func (d *Daemon) adoptLoop(ctx context.Context) {
	every(ctx, d.cfg.AdoptEvery, func() { d.adopt(ctx) })
}

// every calls f every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// adopt drives the active runs (waiting, interrupted, running for longer
// than orphanGrace without an update) that no process drives; a run whose
// drive failed is adopted again after a backoff. The runs left undriven
// are reported by /healthz and orchestrator_runs_undriven.
func (d *Daemon) adopt(ctx context.Context) {
	runs, err := d.cfg.Store.ListRuns(ctx, store.RunFilter{Status: takeUp, Brief: true})
	if err != nil {
		if ctx.Err() == nil {
			d.store.failed("adopt runs: list runs", err) // one line an outage (outage.go)
		}
		return
	}
	d.store.ok()
	now := time.Now()
	d.take(ctx, runs, -1, "adopt", "adopting a run no process drives", func(run store.Run) bool {
		driven, err := d.cfg.Store.RunDriven(run.ID)
		if err != nil {
			d.log.Error("adopt runs: is the run driven", "run", run.ID, "err", err)
			return true
		}
		return driven || (run.Status == store.RunRunning && now.Sub(run.UpdatedAt) < orphanGrace)
	})
}

// take drives, each in its own goroutine, the runs not driven here (at most
// room of them; -1: no bound) that skip does not leave out, except those
// whose drive failed lately: they wait out their backoff and are reported
// undriven (/healthz, orchestrator_runs_undriven).
func (d *Daemon) take(ctx context.Context, runs []store.Run, room int, trigger, msg string, skip func(store.Run) bool) {
	now := time.Now()
	var undriven []string
	for _, run := range runs {
		if room == 0 {
			break
		}
		d.mu.Lock()
		_, here := d.driving[run.ID]
		r, failed := d.failed[run.ID]
		stopping := d.stopping
		d.mu.Unlock()
		if here || stopping || skip(run) {
			continue
		}
		if failed && now.Before(r.at) {
			undriven = append(undriven, run.ID)
			continue
		}
		if !d.register(run.ID, run.Spec) {
			continue
		}
		room--
		d.log.Info(msg, "run", run.ID, "spec", run.Spec, "status", run.Status)
		go func() { _ = d.drive(ctx, run.ID, run.Spec, trigger) }()
	}
	// The gauge first: whoever sees /healthz degraded finds it counted.
	d.cfg.Metrics.setUndriven(len(undriven))
	d.mu.Lock()
	d.undriven = undriven
	d.mu.Unlock()
}

// register notes that this process drives runID (of spec, when not empty);
// false when it already does, or shuts down. Each true must be followed by drive.
func (d *Daemon) register(runID, spec string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.driving[runID]; ok || d.stopping {
		return false
	}
	d.driving[runID] = spec
	if spec != "" {
		d.bySpec[spec]++
	}
	d.wg.Add(1)
	d.cfg.Metrics.driving(1)
	return true
}

func (d *Daemon) unregister(runID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	spec, ok := d.driving[runID]
	if !ok {
		return
	}
	delete(d.driving, runID)
	if spec != "" {
		if d.bySpec[spec]--; d.bySpec[spec] <= 0 {
			delete(d.bySpec, spec)
		}
	}
	d.cfg.Metrics.driving(-1)
	d.wg.Done()
}

// drive drives a registered run and logs how it ended. Its error is that
// of a run that could not go on; a shutdown, a question left pending and
// a run driven by another process are not errors.
func (d *Daemon) drive(ctx context.Context, runID, spec, trigger string) error {
	run, err := d.cfg.Runs.Drive(ctx, runID)
	d.noteDriven(runID, err, ctx.Err() != nil)
	d.unregister(runID) // before logging: whoever reads the log sees the run gone
	log := d.log.With("run", runID, "spec", spec, "trigger", trigger)
	switch {
	case err == nil:
		log.Info("run ended", "status", run.Status)
		return nil
	case errors.Is(err, store.ErrLocked):
		log.Info("run not taken up: another process drives it", "err", err)
		return nil
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		log.Info("run stopped by the shutdown; it stays resumable", "status", run.Status)
		return nil
	case errors.Is(err, runner.ErrParked):
		log.Info("run waits on a question; the leading instance asks it, and any instance resumes the run once answered")
		return nil
	case errors.Is(err, runner.ErrLeaseLost):
		log.Warn("run left to another instance: this one lost its lease (stalled, or lost the database)", "err", err)
		return nil
	case errors.Is(err, runner.ErrWaiting):
		log.Warn("run left waiting: no surface of the daemon can take the answer; answer it with `orchestrator answer`, then resume it",
			"status", run.Status, "err", err)
		return nil
	default:
		log.Error("run stopped on an error", "status", run.Status, "err", err)
		return fmt.Errorf("run %s: %w", runID, err)
	}
}

// noteDriven records how a drive ended: a drive stopped on an error (not
// the shutdown, not another process) makes the run adopted again only after
// a backoff, doubled each time up to maxDriveBackoff, with jitter.
func (d *Daemon) noteDriven(runID string, err error, stopped bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil || stopped || errors.Is(err, store.ErrLocked) || errors.Is(err, runner.ErrWaiting) ||
		errors.Is(err, runner.ErrParked) || errors.Is(err, runner.ErrLeaseLost) {
		delete(d.failed, runID)
		return
	}
	r := d.failed[runID]
	r.n++
	wait := retry.Backoff{Initial: d.cfg.AdoptEvery, Max: maxDriveBackoff, Jitter: retry.Jitter}.Wait(r.n - 1)
	if wait <= 0 {
		wait = maxDriveBackoff
	}
	r.at = time.Now().Add(wait)
	d.failed[runID] = r
}

// runSpec is the scheduler's run function: create a run of the spec and
// drive it. It returns once the run is final, left waiting, or stopped by
// the shutdown, so the scheduler skips the spec's ticks meanwhile.
func (d *Daemon) runSpec(ctx context.Context, sp specs.Spec) error {
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

// Health is the body of /healthz.
type Health struct {
	Status string `json:"status"` // "ok", "shutting down" or "error"
	// Driving counts the runs this daemon drives now.
	Driving int `json:"driving"`
	// Leader: this instance leads (asks the waiting runs' questions,
	// polls GitHub, holds the Discord gateway); always true on SQLite.
	Leader bool `json:"leader"`
	// Running and Waiting count the store's runs in those states (all
	// processes).
	Running int `json:"running"`
	Waiting int `json:"waiting"`
	// Undriven lists the active runs that no process drove at the
	// daemon's last look (their drive failed; adopted again after a
	// backoff); Status is then "degraded".
	Undriven []string `json:"undriven,omitempty"`
	// SpecProblems lists the files of the specs folder that do not
	// validate (or cannot be read) at the last rescan; each keeps its last
	// good version scheduled when it had one (kept). Status is then
	// "degraded".
	SpecProblems []SpecProblem `json:"spec_problems,omitempty"`
	// SurfaceProblems lists the surfaces whose service does not serve
	// them now (a request not answered in time, polls refused); Status is
	// then "degraded".
	SurfaceProblems []SurfaceProblem `json:"surface_problems,omitempty"`
	Error           string           `json:"error,omitempty"`
}

// healthz answers 200 with Health while serving (status "ok", or
// "degraded" with runs no process drives or spec files that do not
// validate); 503 while shutting down or when
// the store cannot be read.
func (d *Daemon) healthz(w http.ResponseWriter, r *http.Request) {
	h, code := d.health(r.Context())
	writeHealth(w, h, code)
}

// statusz is /healthz for monitoring: the same body, and 200 only when
// the status is "ok" (503 when degraded too). A load balancer checks
// /healthz, which stays 200 while degraded: a spec that does not validate
// must not take the only webhook receiver out of it.
func (d *Daemon) statusz(w http.ResponseWriter, r *http.Request) {
	h, code := d.health(r.Context())
	if h.Status != "ok" {
		code = http.StatusServiceUnavailable
	}
	writeHealth(w, h, code)
}

func writeHealth(w http.ResponseWriter, h Health, code int) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(h)
}

// health is what /healthz and /statusz say, and /healthz's status code.
func (d *Daemon) health(ctx context.Context) (Health, int) {
	d.mu.Lock()
	h := Health{Status: "ok", Driving: len(d.driving), Leader: d.leader, Undriven: slices.Clone(d.undriven), SpecProblems: slices.Clone(d.specProblems)}
	stopping := d.stopping
	d.mu.Unlock()
	code := http.StatusOK
	h.SurfaceProblems = d.cfg.Metrics.surfaceHealth.problems()
	if len(h.Undriven) > 0 || len(h.SpecProblems) > 0 || len(h.SurfaceProblems) > 0 {
		h.Status = "degraded"
	}
	if stopping {
		h.Status, code = "shutting down", http.StatusServiceUnavailable
	}
	runs, err := d.cfg.Store.ListRuns(ctx, store.RunFilter{Status: []store.RunStatus{store.RunRunning, store.RunWaiting}})
	switch {
	case err != nil && ctx.Err() == nil:
		d.store.failed("healthz: list runs", err) // one line an outage (outage.go)
		since, _, _ := d.store.down()
		// Why, not the driver's words (hosts, users): the log has them.
		h.Status, h.Error, code = "degraded", "store unreachable since "+since.UTC().Format(time.RFC3339), http.StatusServiceUnavailable
	case err == nil:
		d.store.ok()
	}
	for _, run := range runs {
		switch run.Status {
		case store.RunRunning:
			h.Running++
		case store.RunWaiting:
			h.Waiting++
		}
	}
	return h, code
}
