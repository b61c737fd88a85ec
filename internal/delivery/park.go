package delivery

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Several instances (one shared store, each with its own state directory
// and its own clone of the repository) may drive the same run, one after
// the other: a run that waits for answers holds no process, and whichever
// instance claims it next runs its next turn. The run's work in progress
// travels between them on the run's branch: Park commits the worktree's
// changes as a work-in-progress commit and pushes the branch when the run
// starts waiting, and records the commit (store.Delivery.CommitSHA, with
// Pushed, while the state is still prepared). Workdir on any instance then
// makes sure the run's worktree is its own and holds that commit: the
// worktree of an instance that drove the run last is used as it is; any
// other is added again from the pushed branch. Deliver goes on from there:
// the pull request's branch carries the work-in-progress commits, then the
// final commit.
//
// No commit of the run is ever lost on the way. Park ties the run to this
// host (store.Run.Host) before it commits, records the commit before it
// pushes (CommitSHA with Pushed false: origin may not have it), and unties
// the run once the push is recorded. A push that fails leaves the run tied:
// only an instance on this host takes it up, and `status` says why. An
// instance that has not got the recorded commit (not in its clone's branch,
// not on origin) refuses to go on (store.ErrWorkElsewhere) instead of
// starting from the base, and no worktree is ever added with -B over a
// local branch that holds commits its start lacks.

// Park hands the run's work in progress over to whichever instance drives
// the run next: the worktree's changes, if any, are committed on the run's
// branch ("work in progress of run X at turn N") and the branch is pushed
// (never forced). It is idempotent: parking again with nothing new does
// nothing, and parking again after a push that failed pushes again. Call it while the run is still held (before its lease is
// released), so that no other instance starts from the branch before the
// push.
//
// A run delivered without a push (o.Push false, or no remote) is not
// parked: its work stays on this machine, and Park returns nil with the
// delivery's Pushed left false. So is a run that has no worktree yet or
// whose delivery went past the commit.
func (d *Deliverer) Park(ctx context.Context, run store.Run, o Options) error {
	o = o.withDefaults()
	dl, ok, err := d.cfg.Store.Delivery(ctx, run.ID)
	if err != nil || !ok || dl.State != store.DeliveryPrepared || !dl.RemovedAt.IsZero() || !o.Push {
		return err
	}
	g := d.cfg.Git
	if !d.mine(run, dl) || !g.isWorktree(ctx, dl.Worktree) {
		// The run's worktree is not here (this drive ran no turn): the
		// work since its last park, if any, is where it was made.
		return fmt.Errorf("park run %s: its worktree %s is not on this instance; the instance that holds it keeps what was not parked", run.ID, dl.Worktree)
	}
	if parked(dl) && !g.contains(ctx, dl.Worktree, "HEAD", dl.CommitSHA) {
		// A stale worktree of ours (the run went on elsewhere and this
		// drive ran no turn): it must not be pushed over the run's work.
		return fmt.Errorf("park run %s: its worktree %s is behind the work parked at %.12s", run.ID, dl.Worktree, dl.CommitSHA)
	}
	gd, err := d.verify(ctx, run, dl, o)
	if err != nil {
		return fmt.Errorf("park run %s: %w", run.ID, err)
	}
	if gd.PushURL == "" {
		return nil
	}
	env := wtEnv(gd, dl)
	status, err := g.run(ctx, dl.Worktree, env, "", "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return fmt.Errorf("park run %s: %w", run.ID, err)
	}
	head, _ := g.resolveWith(ctx, dl.Worktree, env, "HEAD")
	if status == "" && (head == dl.BaseCommit || (dl.Pushed && head == dl.CommitSHA)) {
		return nil // nothing done yet, or nothing since the last park
	}
	// Secrets and oversized files are left out of the work in progress
	// (secrets.go): the final delivery asks about them.
	staged, err := d.screen(ctx, run, dl, o, env, true)
	if err != nil {
		return fmt.Errorf("park run %s: %w", run.ID, err)
	}
	// Until origin has the work in progress, the run stays with this
	// machine: no instance elsewhere may take it up and start without it.
	if err := d.cfg.Store.SetRunHost(ctx, run.ID, store.Hostname()); err != nil {
		return fmt.Errorf("park run %s: %w", run.ID, err)
	}
	if staged {
		turn, err := lastTurn(ctx, d.cfg.Store, run.ID)
		if err != nil {
			return err
		}
		msg := fmt.Sprintf("orchestrator: work in progress of run %s at turn %d\n\n"+
			"The run waits for answers; whichever orchestrator instance resumes it goes on from this commit.\n", run.ID, turn)
		if _, err := g.run(ctx, dl.Worktree, append(env, authorEnv(o)...), msg, "commit", "--quiet", "--no-verify", "--file", "-"); err != nil {
			return fmt.Errorf("park run %s: commit its work in progress: %w", run.ID, err)
		}
	}
	head, _ = g.resolveWith(ctx, dl.Worktree, env, "HEAD")
	if head == dl.BaseCommit || (dl.Pushed && head == dl.CommitSHA) {
		return nil // all that changed was left out
	}
	if dl.CommitSHA != head || dl.Pushed {
		// The latest work in progress, not on origin yet.
		dl.CommitSHA, dl.Pushed = head, false
		if err := d.cfg.Store.SaveDelivery(ctx, dl); err != nil {
			return err
		}
	}
	if err := d.push(ctx, run, dl, o); err != nil {
		return fmt.Errorf("park run %s: its work in progress (commit %.12s) stays on host %s until a push succeeds: %w",
			run.ID, head, store.Hostname(), err)
	}
	dl.Pushed = true
	if err := d.cfg.Store.SaveDelivery(ctx, dl); err != nil {
		return err
	}
	if err := d.cfg.Store.ReleaseRunHost(ctx, run.ID, store.Hostname()); err != nil {
		return err
	}
	d.log.Info("work in progress parked", "run", run.ID, "branch", dl.Branch, "commit", head)
	return nil
}

// lastTurn is the number of the run's last turn (0: none yet).
func lastTurn(ctx context.Context, st *store.Store, runID string) (int, error) {
	turns, err := st.Turns(ctx, runID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range turns {
		n = max(n, t.Seq)
	}
	return n, nil
}

// authorEnv makes the options' identity the author and committer.
func authorEnv(o Options) []string {
	return []string{"GIT_AUTHOR_NAME=" + o.AuthorName, "GIT_AUTHOR_EMAIL=" + o.AuthorEmail,
		"GIT_COMMITTER_NAME=" + o.AuthorName, "GIT_COMMITTER_EMAIL=" + o.AuthorEmail}
}

// parked reports whether the run's work in progress is on the remote, at
// dl.CommitSHA, to go on from.
func parked(dl store.Delivery) bool {
	return dl.State == store.DeliveryPrepared && dl.Pushed && dl.CommitSHA != ""
}

// unpushed reports whether the run's latest work in progress was committed
// (dl.CommitSHA) but its push failed: the remote may not have it.
func unpushed(dl store.Delivery) bool {
	return dl.State == store.DeliveryPrepared && !dl.Pushed && dl.CommitSHA != ""
}

// parkedHere reports whether the run has recorded work in progress to go
// on from, pushed or not.
func parkedHere(dl store.Delivery) bool { return parked(dl) || unpushed(dl) }

// worktreePath is where this instance keeps the run's worktree.
func (d *Deliverer) worktreePath(runID string) string { return filepath.Join(d.cfg.Root, runID) }

// mine reports whether the recorded worktree is this instance's: where it
// keeps the run's worktree. Another instance's (another state directory)
// is not, even when it is on this machine.
func (d *Deliverer) mine(run store.Run, dl store.Delivery) bool {
	return samePath(dl.Worktree, d.worktreePath(run.ID))
}

func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}

// localWorkDir is the run's workdir on this instance.
func (d *Deliverer) localWorkDir(run store.Run) string {
	if d.cfg.LocalWorkDir != nil {
		if wd := d.cfg.LocalWorkDir(run); wd != "" {
			return wd
		}
	}
	return run.WorkDir
}

// here makes sure the run's recorded worktree is this instance's and holds
// its latest work, and returns the delivery as it now is. A worktree of
// ours that holds the parked commit (or was never parked) is used as it
// is. Otherwise the worktree is added (again) here: from the run's local
// branch when that holds the latest work, else from its branch on the
// remote, else (nothing of the run's was ever parked) from the base; the
// delivery then records this instance's checkout and worktree.
func (d *Deliverer) here(ctx context.Context, run store.Run, dl store.Delivery, o Options) (store.Delivery, error) {
	g := d.cfg.Git
	mine := d.mine(run, dl)
	if mine && g.isWorktree(ctx, dl.Worktree) {
		if !parked(dl) || g.contains(ctx, dl.Worktree, "HEAD", dl.CommitSHA) {
			return dl, nil
		}
		// Another instance drove the run since and parked newer work:
		// what is here is stale.
	}
	top := dl.RepoDir
	if !mine || !isDir(top) {
		var err error
		if top, err = g.toplevel(ctx, d.localWorkDir(run)); err != nil {
			return dl, err
		}
	}
	wt := d.worktreePath(run.ID)
	gd, keep, err := d.guardFor(ctx, run.ID, top, o.Remote)
	if err != nil {
		return dl, err
	}
	start, hasLocal, err := d.startPoint(ctx, run, dl, o, top, gd, mine)
	if err != nil {
		return dl, err
	}
	localRef := "refs/heads/" + dl.Branch
	// From here until the worktree is added again, the checkout's
	// worktrees change (lockRepo).
	unlock, err := d.lockRepo(ctx, gd.CommonDir)
	if err != nil {
		return dl, err
	}
	defer unlock()
	if !mine && g.isWorktree(ctx, dl.Worktree) && isDir(dl.RepoDir) {
		// Another instance's worktree of the run, on this machine: it is
		// stale (we hold the run now, and what it committed is on the
		// branch we start from), and in a clone both instances share it
		// would keep the branch checked out.
		if _, err := g.run(ctx, dl.RepoDir, nil, "", "worktree", "remove", "--force", "--force", dl.Worktree); err != nil {
			d.log.Warn("remove another instance's worktree of the run", "run", run.ID, "worktree", dl.Worktree, "err", err)
		}
	}
	if hasLocal && start != localRef {
		// -B resets the local branch to start: never when it holds
		// commits start does not (work in progress whose push failed).
		switch {
		case g.contains(ctx, top, start, localRef):
		case g.contains(ctx, top, localRef, start):
			start = localRef
		default:
			tip, _ := g.resolve(ctx, top, localRef)
			return dl, fmt.Errorf("run %s: its branch %s in %s (at %.12s) and %s have both moved on; not resetting it, so that no commit is lost",
				run.ID, dl.Branch, top, tip, start)
		}
	}
	if err := d.dropWorktree(ctx, top, wt); err != nil {
		return dl, err
	}
	if err := os.MkdirAll(d.cfg.Root, 0o700); err != nil {
		return dl, fmt.Errorf("worktrees: %w", err)
	}
	args := []string{"worktree", "add", "--quiet", "--no-track", "-B", dl.Branch, wt, start}
	if start == localRef {
		args = []string{"worktree", "add", "--quiet", wt, dl.Branch}
	}
	if _, err := g.run(ctx, top, nil, "", args...); err != nil {
		return dl, fmt.Errorf("add the run's worktree again: %w", err)
	}
	if _, err := d.record(ctx, gd, top, wt, keep); err != nil {
		return dl, err
	}
	moved := !mine || top != dl.RepoDir
	dl.RepoDir, dl.Worktree = top, wt
	if moved {
		if err := d.cfg.Store.SaveDelivery(ctx, dl); err != nil {
			return dl, err
		}
	}
	d.log.Info("worktree added again", "run", dl.RunID, "worktree", wt, "branch", dl.Branch, "from", start)
	return dl, nil
}

// startPoint chooses what here adds the run's worktree from, in top: the
// latest of the run's local branch and its branch on the remote (fetched
// first) when they hold its parked work, else the base. hasLocal reports
// whether top has the run's local branch. Work in progress that neither
// holds is an error (store.ErrWorkElsewhere when it stays with another
// host).
func (d *Deliverer) startPoint(ctx context.Context, run store.Run, dl store.Delivery, o Options, top string, gd store.GitGuard, mine bool) (string, bool, error) {
	g := d.cfg.Git
	remote := gd.FetchURL != ""
	remoteRef := "refs/remotes/" + o.Remote + "/" + dl.Branch
	fetched := false
	if remote {
		err := d.fetch(ctx, gd, top, "+refs/heads/"+dl.Branch+":"+remoteRef)
		fetched = err == nil
		if !fetched && parked(dl) {
			return "", false, fmt.Errorf("run %s: fetch its branch %s from %s to go on from its work in progress: %w", run.ID, dl.Branch, o.Remote, err)
		}
	}
	// The run's work: the latest of the local branch and the remote's.
	localRef := "refs/heads/" + dl.Branch
	_, hasLocal := g.resolve(ctx, top, localRef)
	var start string
	switch {
	case parkedHere(dl) && hasLocal && g.contains(ctx, top, localRef, dl.CommitSHA):
		start = localRef
	case parkedHere(dl) && fetched && g.contains(ctx, top, remoteRef, dl.CommitSHA):
		start = remoteRef
	case unpushed(dl):
		// Its latest work in progress never reached the remote: only the
		// checkout it was made in has it, and the run goes on there.
		host := run.Host
		if host == "" {
			host = "the one whose checkout holds it"
		}
		return "", false, fmt.Errorf("run %s: its work in progress (commit %.12s) is not on %s (its push failed) nor in %s; it stays with host %s: %w",
			run.ID, dl.CommitSHA, o.Remote, top, host, store.ErrWorkElsewhere)
	case parked(dl):
		return "", false, fmt.Errorf("run %s: its branch %s on %s does not hold its work in progress (commit %.12s): was it rewritten?", run.ID, dl.Branch, o.Remote, dl.CommitSHA)
	case mine && hasLocal:
		start = localRef
	case fetched:
		start = remoteRef
	default:
		if _, ok := g.resolve(ctx, top, dl.BaseCommit); !ok && remote {
			if err := d.fetch(ctx, gd, top, "+refs/heads/*:refs/remotes/"+o.Remote+"/*"); err != nil {
				return "", false, fmt.Errorf("fetch %s: %w", o.Remote, err)
			}
		}
		start = dl.BaseCommit
	}
	return start, hasLocal, nil
}

// dropWorktree removes what is left at wt (a stale worktree of ours, a
// directory left over) so that the run's worktree can be added there.
func (d *Deliverer) dropWorktree(ctx context.Context, top, wt string) error {
	g := d.cfg.Git
	if _, err := os.Stat(wt); err == nil {
		if g.isWorktree(ctx, wt) {
			g.run(ctx, top, nil, "", "worktree", "remove", "--force", "--force", wt)
		}
		if err := os.RemoveAll(wt); err != nil {
			return fmt.Errorf("worktree %s: %w", wt, err)
		}
	}
	g.run(ctx, top, nil, "", "worktree", "prune")
	return nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
