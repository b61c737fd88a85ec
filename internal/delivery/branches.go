package delivery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// PrunedBranch is a run's local branch PruneBranches removed (or, dry,
// would remove).
type PrunedBranch struct {
	RunID   string
	RepoDir string
	Branch  string
	Commit  string
	Pushed  bool
}

// PruneBranches removes the local branches that runs' deliveries made in
// the person's checkouts, once nothing needs them: the run is over, its
// worktree removed and its push not pending, and either the branch was
// pushed (it is on the remote) or the run ended before endedBefore. A
// branch is removed only while it still points at the run's own commit
// (the base, for a run that committed nothing) and no worktree has it
// checked out: a branch someone moved on or works in is theirs. The
// removal is git update-ref -d with that commit as the expected value, so
// a branch that moves meanwhile stays. dry lists without removing.
func (d *Deliverer) PruneBranches(ctx context.Context, endedBefore time.Time, dry bool) ([]PrunedBranch, error) {
	ended, err := d.cfg.Store.EndedDeliveries(ctx)
	if err != nil {
		return nil, err
	}
	byRepo := map[string][]store.EndedDelivery{}
	var repos []string
	for _, e := range ended {
		if e.Branch == "" || (!e.Pushed && !e.EndedAt.Before(endedBefore)) {
			continue
		}
		if _, ok := byRepo[e.RepoDir]; !ok {
			repos = append(repos, e.RepoDir)
		}
		byRepo[e.RepoDir] = append(byRepo[e.RepoDir], e)
	}
	var out []PrunedBranch
	var errs []error
	for _, repo := range repos {
		if fi, err := os.Stat(repo); err != nil || !fi.IsDir() {
			continue // the checkout is gone, and its branches with it
		}
		p, err := d.pruneIn(ctx, repo, byRepo[repo], dry)
		out = append(out, p...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// pruneIn removes the branches of ended in the checkout repo.
func (d *Deliverer) pruneIn(ctx context.Context, repo string, ended []store.EndedDelivery, dry bool) ([]PrunedBranch, error) {
	g := d.cfg.Git
	refs, err := g.run(ctx, repo, nil, "", "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
	if err != nil {
		return nil, fmt.Errorf("branches of %s: %w", repo, err)
	}
	tips := map[string]string{}
	for _, l := range strings.Split(refs, "\n") {
		if ref, sha, ok := strings.Cut(l, " "); ok {
			tips[ref] = sha
		}
	}
	wts, err := g.run(ctx, repo, nil, "", "worktree", "list", "--porcelain")
	if err != nil {
		return nil, fmt.Errorf("worktrees of %s: %w", repo, err)
	}
	checkedOut := map[string]bool{}
	for _, l := range strings.Split(wts, "\n") {
		if ref, ok := strings.CutPrefix(l, "branch "); ok {
			checkedOut[ref] = true
		}
	}
	var out []PrunedBranch
	var errs []error
	for _, e := range ended {
		ref := "refs/heads/" + e.Branch
		want := e.CommitSHA
		if e.State == store.DeliveryUnchanged || e.State == store.DeliveryPrepared || want == "" {
			want = e.BaseCommit
		}
		tip, ok := tips[ref]
		if !ok || want == "" || tip != want || checkedOut[ref] {
			continue
		}
		if !dry {
			if _, err := g.run(ctx, repo, nil, "", "update-ref", "-d", ref, want); err != nil {
				errs = append(errs, fmt.Errorf("remove branch %s of run %s in %s: %w", e.Branch, e.RunID, repo, err))
				continue
			}
		}
		delete(tips, ref) // two runs of one branch name: one removal
		out = append(out, PrunedBranch{RunID: e.RunID, RepoDir: repo, Branch: e.Branch, Commit: want, Pushed: e.Pushed})
	}
	return out, errors.Join(errs...)
}
