package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// orphanGrace is how long a run in status running may go without an update
// before the daemon adopts it when no process drives it: a process that just
// created a run takes its lock right after.
const orphanGrace = time.Minute

// takeUp are the statuses of the runs a starting daemon drives on: those
// queued by `orchestrator submit`, those waiting on a question, those
// interrupted by a shutdown, and those left running by a process that died
// (a run another process still drives is locked, and skipped).
var takeUp = []store.RunStatus{store.RunQueued, store.RunWaiting, store.RunInterrupted, store.RunRunning}

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
