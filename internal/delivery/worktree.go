package delivery

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Workdir returns the directory the run's turns run in: its worktree (the
// run's workdir's place in it), added on first use. A run whose worktree is
// gone (a restart on a cleaned machine) gets it back, from its branch if it
// still exists, else from its pushed branch, else from the base. A run
// another instance drove and parked (Park) continues here from the work in
// progress it pushed (see here).
func (d *Deliverer) Workdir(ctx context.Context, run store.Run, o Options) (string, error) {
	o = o.withDefaults()
	g := d.cfg.Git
	dl, ok, err := d.cfg.Store.Delivery(ctx, run.ID)
	if err != nil {
		return "", err
	}
	if ok {
		if !dl.RemovedAt.IsZero() {
			return "", fmt.Errorf("run %s: its worktree %s was removed", run.ID, dl.Worktree)
		}
		if dl, err = d.here(ctx, run, dl, o); err != nil {
			return "", err
		}
		if err := d.refresh(ctx, run, dl, o); err != nil {
			return "", err
		}
		return subdir(dl.Worktree, dl.RepoDir, d.localWorkDir(run)), nil
	}
	workdir := d.localWorkDir(run)
	top, err := g.toplevel(ctx, workdir)
	if err != nil {
		return "", err
	}
	// The remote's URLs are read now, before the agent runs; every fetch
	// and push of the run goes to them (gitguard.go).
	gd, _, err := d.guardFor(ctx, run.ID, top, o.Remote)
	if err != nil {
		return "", err
	}
	if o.RemoteRepo != "" {
		if err := checkRemoteRepo(top, o.Remote, o.RemoteRepo, gd.FetchURL, gd.PushURL); err != nil {
			return "", err
		}
	}
	remote := gd.FetchURL != ""
	if remote {
		if err := d.fetch(ctx, gd, top, "+refs/heads/*:refs/remotes/"+o.Remote+"/*"); err != nil {
			return "", fmt.Errorf("fetch %s: %w", o.Remote, err)
		}
	}
	base := o.Base
	if base == "" {
		base, err = d.defaultBase(ctx, top, o.Remote, gd)
		if err != nil {
			return "", err
		}
	}
	var baseCommit string
	var found bool
	if remote {
		baseCommit, found = g.resolve(ctx, top, "refs/remotes/"+o.Remote+"/"+base)
	}
	if !found {
		baseCommit, found = g.resolve(ctx, top, base)
	}
	if !found {
		return "", fmt.Errorf("base branch %q: no such branch in %s (on %s or locally); set git.base", base, top, o.Remote)
	}
	branch := BranchName(o.Branch, run)
	if _, err := g.run(ctx, top, nil, "", "check-ref-format", "--branch", branch); err != nil {
		return "", fmt.Errorf("branch %q (from git.branch %q) is not a valid branch name", branch, o.Branch)
	}
	wt := d.worktreePath(run.ID)
	if err := os.MkdirAll(d.cfg.Root, 0o700); err != nil {
		return "", fmt.Errorf("worktrees: %w", err)
	}
	unlock, err := d.lockRepo(ctx, gd.CommonDir)
	if err != nil {
		return "", err
	}
	_, err = g.run(ctx, top, nil, "", "worktree", "add", "--quiet", "--no-track", "-b", branch, wt, baseCommit)
	unlock()
	if err != nil {
		return "", fmt.Errorf("add the run's worktree: %w", err)
	}
	if _, err := d.record(ctx, gd, top, wt, false); err != nil {
		return "", err
	}
	dl = store.Delivery{RunID: run.ID, RepoDir: top, Worktree: wt, Branch: branch, Base: base, BaseCommit: baseCommit,
		State: store.DeliveryPrepared}
	if err := d.cfg.Store.SaveDelivery(ctx, dl); err != nil {
		return "", err
	}
	d.log.Info("worktree added", "run", run.ID, "worktree", wt, "branch", branch, "base", base)
	return subdir(wt, top, workdir), nil
}

// subdir is where workdir (inside the checkout top) is in the worktree wt.
func subdir(wt, top, workdir string) string {
	rel, err := filepath.Rel(top, workdir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		if a, errA := filepath.EvalSymlinks(top); errA == nil {
			if b, errB := filepath.EvalSymlinks(workdir); errB == nil {
				if r2, err := filepath.Rel(a, b); err == nil && r2 != "." && !strings.HasPrefix(r2, "..") {
					return filepath.Join(wt, r2)
				}
			}
		}
		return wt
	}
	return filepath.Join(wt, rel)
}

func (d *Deliverer) defaultBase(ctx context.Context, top, remote string, gd store.GitGuard) (string, error) {
	g := d.cfg.Git
	if gd.FetchURL != "" {
		if ref, err := g.run(ctx, top, nil, "", "symbolic-ref", "--quiet", "refs/remotes/"+remote+"/HEAD"); err == nil {
			return strings.TrimPrefix(ref, "refs/remotes/"+remote+"/"), nil
		}
		if name, ok := d.remoteHead(ctx, gd); ok {
			return name, nil
		}
	}
	cur, err := g.run(ctx, top, nil, "", "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil || cur == "" {
		return "", fmt.Errorf("no base branch: %s has no default branch on %s and no current branch; set git.base", top, remote)
	}
	return cur, nil
}
