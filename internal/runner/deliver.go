package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/orchestrator-dev/orchestrator/internal/secretscan"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Delivery carries one run's work to people through git (internal/delivery
// behind an adapter that knows the run's settings). Every method is
// idempotent: the run loop calls them again after a restart.
type Delivery interface {
	// Workdir returns the directory the run's turns run in (its own
	// worktree), preparing it on first use and finding it again after.
	Workdir(ctx context.Context, run store.Run) (string, error)
	// Deliver commits, pushes and opens the pull request after the last
	// turn, going on from the last step done; it returns a line for people
	// ("pull request …", "no change: …"). failpoint is Config.Failpoint.
	Deliver(ctx context.Context, run store.Run, failpoint func(string)) (string, error)
	// Finish is called once the run is final: the worktree of a run that
	// ended done is removed.
	Finish(ctx context.Context, run store.Run) error
}

// EventDelivered says what a run's delivery did, in Text.
const EventDelivered EventKind = "delivered"

// delivery returns the run's delivery, or nil when it has none.
func (r *Runner) delivery(run store.Run) (Delivery, error) {
	if r.cfg.Delivery == nil {
		return nil, nil
	}
	return r.cfg.Delivery(run)
}

// workdir is where the run's next turn runs: its delivery's worktree, else
// the run's workdir.
func (r *Runner) workdir(ctx context.Context, run store.Run) (string, error) {
	dv, err := r.delivery(run)
	if err != nil || dv == nil {
		return run.WorkDir, err
	}
	wd, err := dv.Workdir(ctx, run)
	if err != nil {
		return "", fmt.Errorf("prepare the run's worktree: %w", err)
	}
	return wd, nil
}

// workdirFailed ends a turn that has no directory to run in: the run fails
// with the reason, unless ctx ended (a shutdown leaves it resumable).
func (r *Runner) workdirFailed(ctx context.Context, run store.Run, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return r.fail(ctx, run, err.Error())
}

// done ends a run whose last turn succeeded: its work is delivered, then
// the run is done. A delivery that fails makes the run fail (its worktree
// is kept); one stopped by ctx leaves the run resumable, and the next
// attempt goes on from the last step recorded.
func (r *Runner) done(ctx context.Context, d *drive, run store.Run, last store.Turn) error {
	final := last.Result.FinalText
	dv, err := r.delivery(run)
	if err != nil {
		return r.fail(ctx, run, fmt.Sprintf("deliver: %v", err))
	}
	if dv != nil {
		if final != "" {
			run.FinalText = final
		}
		line, err := r.deliverWork(ctx, dv, run)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var held *secretscan.Error
			if errors.As(err, &held) {
				return r.askWithheld(ctx, d, run, last, held) // secrets.go
			}
			return r.fail(ctx, run, fmt.Sprintf("deliver: %v", err))
		}
		r.emit(Event{Kind: EventDelivered, RunID: run.ID, Text: line})
	}
	r.emit(Event{Kind: EventDone, RunID: run.ID})
	if err := r.cfg.Store.UpdateRun(ctx, run.ID, store.RunUpdate{Status: store.RunDone, FinalText: nonEmpty(final)}); err != nil {
		return err
	}
	if dv != nil {
		run.Status = store.RunDone
		if err := dv.Finish(context.WithoutCancel(ctx), run); err != nil {
			r.log.Warn("remove the run's worktree", "run", run.ID, "err", err)
		}
	}
	return nil
}
