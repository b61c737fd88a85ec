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

// Releaser is a Delivery that can give the run's checkout back as it was
// (its git configuration and hooks, which the agent could change) when the
// run will not be delivered now: Release is called whenever a drive of the
// run ends (done, failed, cancelled, stopped, waiting, parked or
// interrupted), keeps the worktree, and is idempotent.
type Releaser interface {
	Release(ctx context.Context, run store.Run) error
}

// release gives the run's checkout back (Releaser), best effort.
func (r *Runner) release(ctx context.Context, run store.Run) {
	dv, err := r.delivery(run)
	if err != nil || dv == nil {
		return
	}
	if rl, ok := dv.(Releaser); ok {
		if err := rl.Release(ctx, run); err != nil {
			r.log.Warn("restore the checkout's git configuration and hooks", "run", run.ID, "err", err)
		}
	}
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
//
// Work that is on another instance (store.ErrWorkElsewhere: work in
// progress its push did not bring to the remote) does not fail the run:
// it is left as it is, for the instance that has the work.
func (r *Runner) workdirFailed(ctx context.Context, run store.Run, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, store.ErrWorkElsewhere) {
		r.log.Warn("leaving the run to the instance that has its work", "run", run.ID, "err", err)
		return err
	}
	return r.fail(ctx, run, err.Error())
}

// done ends a run whose last turn succeeded: its work is delivered, then
// the run is done. A delivery that fails for good makes the run fail (its
// worktree is kept); one whose push or pull request still failed after its
// retries leaves the run done with its delivery pending (store.Delivery:
// Redeliver tries again); one that holds back secrets asks what to do
// (secrets.go); one stopped by ctx leaves the run resumable, and the next
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
			if errors.Is(err, store.ErrWorkElsewhere) {
				r.log.Warn("leaving the run to the instance that has its work", "run", run.ID, "err", err)
				return err
			}
			return r.fail(ctx, run, fmt.Sprintf("deliver: %v", err))
		}
		r.emit(Event{Kind: EventDelivered, RunID: run.ID, Text: line})
	}
	r.emit(Event{Kind: EventDone, RunID: run.ID})
	if err := r.cfg.Store.UpdateRun(ctx, run.ID, store.RunUpdate{Status: store.RunDone, FinalText: nonEmpty(final)}); err != nil {
		return err
	}
	if r.requeued(ctx, run.ID) {
		return nil // feedback came while it ran: the loop goes on with it (followup.go)
	}
	if dv != nil {
		run.Status = store.RunDone
		if err := dv.Finish(context.WithoutCancel(ctx), run); err != nil {
			r.log.Warn("remove the run's worktree", "run", run.ID, "err", err)
		}
	}
	return nil
}

// ErrNothingPending: Redeliver found no pending delivery for the run.
var ErrNothingPending = errors.New("no delivery pending")

// Redeliver tries again the delivery of a done run whose push or pull
// request had failed (store.Delivery.Pending), holding the run's lock
// while it does, and returns what the delivery says now. It returns an
// error wrapping ErrNothingPending when there is nothing to try, and one
// wrapping store.ErrWorkElsewhere when the commit to push is on another
// instance.
func (r *Runner) Redeliver(ctx context.Context, runID string) (string, error) {
	run, err := r.cfg.Store.Run(ctx, runID)
	if err != nil {
		return "", err
	}
	lock, err := r.cfg.Store.LockRun(run.ID)
	if err != nil {
		return "", fmt.Errorf("run %s: %w", run.ID, err)
	}
	defer lock.Unlock()
	if run, err = r.cfg.Store.Run(ctx, runID); err != nil {
		return "", err
	}
	dl, ok, err := r.cfg.Store.Delivery(ctx, run.ID)
	if err != nil {
		return "", err
	}
	if run.Status != store.RunDone || !ok || !dl.Pending {
		return "", fmt.Errorf("run %s is %s: %w", run.ID, run.Status, ErrNothingPending)
	}
	dv, err := r.delivery(run)
	if err != nil {
		return "", err
	}
	if dv == nil {
		return "", fmt.Errorf("run %s: its delivery is no longer configured: %w", run.ID, ErrNothingPending)
	}
	line, err := dv.Deliver(ctx, run, r.cfg.Failpoint)
	if err != nil {
		if !errors.Is(err, store.ErrWorkElsewhere) && ctx.Err() == nil {
			// It will not pass by trying again: no longer pending.
			dl, _, _ = r.cfg.Store.Delivery(ctx, run.ID)
			dl.Pending, dl.LastError = false, err.Error()
			if serr := r.cfg.Store.SaveDelivery(ctx, dl); serr != nil {
				return "", errors.Join(err, serr)
			}
		}
		return "", fmt.Errorf("deliver run %s: %w", run.ID, err)
	}
	r.emit(Event{Kind: EventDelivered, RunID: run.ID, Text: line})
	if dl, _, err := r.cfg.Store.Delivery(ctx, run.ID); err == nil && !dl.Pending {
		if err := dv.Finish(context.WithoutCancel(ctx), run); err != nil {
			r.log.Warn("remove the run's worktree", "run", run.ID, "err", err)
		}
	}
	return line, nil
}
