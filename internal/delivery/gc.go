package delivery

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Finish ends a run's delivery: the worktree of a run that ended done is
// removed (with its branch when the run changed nothing); a failed or
// cancelled run's is kept for inspection until gc.
func (d *Deliverer) Finish(ctx context.Context, run store.Run) error {
	if run.Status != store.RunDone {
		return nil
	}
	dl, ok, err := d.cfg.Store.Delivery(ctx, run.ID)
	if err != nil || !ok || !dl.RemovedAt.IsZero() || dl.Pending {
		// A pending delivery keeps the worktree it pushes from.
		return err
	}
	return d.remove(ctx, dl)
}

func (d *Deliverer) remove(ctx context.Context, dl store.Delivery) error {
	g := d.cfg.Git
	if isDir(dl.RepoDir) {
		unlock, err := d.lockCheckout(ctx, dl.RepoDir)
		if err != nil {
			return fmt.Errorf("remove worktree %s: %w", dl.Worktree, err)
		}
		defer unlock()
	}
	if _, err := os.Lstat(dl.Worktree); err == nil {
		if _, err := g.run(ctx, dl.RepoDir, nil, "", "worktree", "remove", "--force", "--force", dl.Worktree); err != nil {
			if rerr := os.RemoveAll(dl.Worktree); rerr != nil {
				return fmt.Errorf("remove worktree %s: %w", dl.Worktree, err)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove worktree %s: %w", dl.Worktree, err)
	}
	// Removed is what is gone, not what a command said it did.
	if _, err := os.Lstat(dl.Worktree); !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			err = errors.New("it is still there after git worktree remove")
		}
		return fmt.Errorf("remove worktree %s: %w", dl.Worktree, err)
	}
	g.run(ctx, dl.RepoDir, nil, "", "worktree", "prune")
	os.RemoveAll(filepath.Join(d.cfg.Root, ".remotes", dl.RunID+".git"))
	if dl.State == store.DeliveryUnchanged || dl.State == store.DeliveryPrepared {
		// The branch holds nothing of the run's: drop it.
		g.run(ctx, dl.RepoDir, nil, "", "branch", "--quiet", "-D", dl.Branch)
	}
	dl.RemovedAt = d.cfg.Now()
	return d.cfg.Store.SaveDelivery(ctx, dl)
}

// Removed is a worktree GC removed.
type Removed struct {
	RunID    string
	Worktree string
	Status   store.RunStatus
}

// GC removes the worktrees of runs that ended (done, failed or cancelled)
// more than olderThan ago, then runs `git worktree prune` in each checkout
// they came from.
func (d *Deliverer) GC(ctx context.Context, olderThan time.Duration) ([]Removed, error) {
	return d.gc(ctx, olderThan, false)
}

// GCHere is GC for one of several instances sharing a store: it removes
// only the worktrees on this machine, and leaves the record of one it
// does not find alone (it may be another machine's).
func (d *Deliverer) GCHere(ctx context.Context, olderThan time.Duration) ([]Removed, error) {
	return d.gc(ctx, olderThan, true)
}

func (d *Deliverer) gc(ctx context.Context, olderThan time.Duration, here bool) ([]Removed, error) {
	kept, err := d.cfg.Store.KeptWorktrees(ctx)
	if err != nil {
		return nil, err
	}
	cutoff := d.cfg.Now().Add(-olderThan)
	var out []Removed
	var errs []error
	repos := map[string]bool{}
	for _, k := range kept {
		repos[k.Delivery.RepoDir] = true
		if !k.Run.Status.Final() || k.Run.UpdatedAt.After(cutoff) || k.Delivery.Pending {
			continue
		}
		if _, err := os.Lstat(k.Delivery.Worktree); here && err != nil {
			continue
		}
		if err := d.remove(ctx, k.Delivery); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, Removed{RunID: k.Run.ID, Worktree: k.Delivery.Worktree, Status: k.Run.Status})
	}
	for dir := range repos {
		if _, err := os.Stat(dir); err == nil {
			if err := d.prune(ctx, dir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return out, errors.Join(errs...)
}

// prune runs `git worktree prune` in the checkout dir.
func (d *Deliverer) prune(ctx context.Context, dir string) error {
	unlock, err := d.lockCheckout(ctx, dir)
	if err != nil {
		return err
	}
	defer unlock()
	_, err = d.cfg.Git.run(ctx, dir, nil, "", "worktree", "prune")
	return err
}
