package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/retry"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

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
		if run.Status == store.RunFailed {
			d.checkFailures(ctx, spec) // schedhealth.go
		}
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
