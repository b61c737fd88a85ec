package runner

import (
	"context"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Parker is a Delivery that can hand a run's work in progress to another
// machine (several instances on one shared store): a waiting run holds no
// process, and whichever instance claims it next must find the work of its
// turns so far.
type Parker interface {
	// Park commits the worktree's changes (if any) as a work-in-progress
	// commit on the run's branch and pushes the branch. Idempotent; a run
	// whose delivery does not push is left alone (its work stays here).
	Park(ctx context.Context, run store.Run) error
	// Portable reports whether Park hands the work over: the delivery
	// pushes the run's branch. A run whose work cannot move stays with
	// its host (store.Run.Host).
	Portable() bool
}

// movable reports whether another machine can go on with a run: its work
// is delivered through git, by a delivery that pushes its branch when the
// run parks. Other runs stay with the host of their working directory.
func (r *Runner) movable(run store.Run) (bool, error) {
	dv, err := r.delivery(run)
	if err != nil || dv == nil {
		return false, err
	}
	p, ok := dv.(Parker)
	return ok && p.Portable(), nil
}

// parkWork hands the run's work in progress over when the run parks
// (Config.Park: it waits for answers with no process). Call it while the
// run is still held, before its lease is released, so that no instance
// claims the run before the branch is pushed. It is best-effort: a failed
// push is logged and the run parks anyway; an instance that takes the run
// then goes on from the last work parked (or this machine's worktree, when
// the run comes back here).
func (r *Runner) parkWork(ctx context.Context, run store.Run) {
	dv, err := r.delivery(run)
	if err != nil {
		r.log.Warn("park the run's work in progress", "run", run.ID, "err", err)
		return
	}
	p, ok := dv.(Parker)
	if !ok {
		return
	}
	if err := p.Park(ctx, run); err != nil {
		r.log.Warn("park the run's work in progress", "run", run.ID, "err", err)
	}
}
