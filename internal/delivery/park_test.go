package delivery

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// otherInstance is a second Deliverer on f's store, as another `serve`
// instance has it: its own state directory (worktrees) and the checkout
// it keeps the runs' workdir in.
func (f *fixture) otherInstance(t *testing.T, checkout string) *Deliverer {
	t.Helper()
	d, err := New(Config{Store: f.st, PRs: f.d.cfg.PRs, Root: filepath.Join(t.TempDir(), "worktrees"),
		LocalWorkDir: func(store.Run) string { return checkout }})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestParkedRunMovesBetweenInstances: instance A parks the run's work in
// progress, instance B goes on from the pushed branch and parks more, A
// takes the run back and delivers: one pull request whose branch holds
// everything, work-in-progress commits included.
func TestParkedRunMovesBetweenInstances(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "a clone each", true: "one clone, two state directories"}[shared]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			origin, checkoutA := repos(t)
			checkoutB := checkoutA
			if !shared {
				checkoutB = filepath.Join(t.TempDir(), "b")
				git(t, filepath.Dir(checkoutB), "clone", "--quiet", origin, checkoutB)
			}
			f := newFixture(t, "")
			a, b := f.d, f.otherInstance(t, checkoutB)
			ctx := context.Background()
			run := f.newRun(t, "r00000p1", checkoutA)
			branch := "refs/heads/orchestrator/nightly-deps/r00000p1"

			wdA, err := a.Workdir(ctx, run, prOpts)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(wdA, "a.txt"), []byte("from A\n"), 0o600)
			if err := a.Park(ctx, run, prOpts); err != nil {
				t.Fatal(err)
			}
			tip := git(t, origin, "rev-parse", branch)
			msg := git(t, origin, "log", "-1", "--format=%an <%ae>|%B", tip)
			if !strings.HasPrefix(msg, "orchestrator <orchestrator@localhost>|orchestrator: work in progress of run r00000p1 at turn 1") {
				t.Fatalf("work-in-progress commit = %q", msg)
			}
			if files := git(t, origin, "ls-tree", "--name-only", tip); files != "README.md\na.txt" {
				t.Fatalf("parked tree: %q", files)
			}
			dl, _, _ := f.st.Delivery(ctx, run.ID)
			if dl.State != store.DeliveryPrepared || !dl.Pushed || dl.CommitSHA != tip {
				t.Fatalf("delivery after park = %+v", dl)
			}
			// Parking again with nothing new does nothing.
			if err := a.Park(ctx, run, prOpts); err != nil {
				t.Fatal(err)
			}
			if again := git(t, origin, "rev-parse", branch); again != tip {
				t.Fatalf("second park moved the branch to %s", again)
			}

			// B goes on from the branch, in its own worktree.
			wdB, err := b.Workdir(ctx, run, prOpts)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(wdB, b.cfg.Root) {
				t.Fatalf("B's workdir %s is not under its worktrees %s", wdB, b.cfg.Root)
			}
			if got, _ := os.ReadFile(filepath.Join(wdB, "a.txt")); string(got) != "from A\n" {
				t.Fatalf("B's worktree lacks A's work: %q", got)
			}
			if head := git(t, wdB, "rev-parse", "HEAD"); head != tip {
				t.Fatalf("B's worktree at %s, want the parked %s", head, tip)
			}
			if exists(wdA) {
				t.Fatalf("A's stale worktree %s is still there", wdA)
			}
			dl, _, _ = f.st.Delivery(ctx, run.ID)
			if dl.Worktree != filepath.Join(b.cfg.Root, run.ID) || !samePath(dl.RepoDir, checkoutB) {
				t.Fatalf("delivery after B took the run = %+v", dl)
			}
			if again, err := b.Workdir(ctx, run, prOpts); err != nil || again != wdB {
				t.Fatalf("B's second Workdir = %s, %v", again, err)
			}
			os.WriteFile(filepath.Join(wdB, "b.txt"), []byte("from B\n"), 0o600)
			if err := b.Park(ctx, run, prOpts); err != nil {
				t.Fatal(err)
			}
			tipB := git(t, origin, "rev-parse", branch)
			if git(t, origin, "rev-parse", tipB+"^") != tip {
				t.Fatalf("B's park is not on top of A's")
			}

			// A takes the run back and delivers.
			wdA2, err := a.Workdir(ctx, run, prOpts)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(wdA2, "b.txt")); string(got) != "from B\n" {
				t.Fatalf("A's worktree lacks B's work: %q", got)
			}
			os.WriteFile(filepath.Join(wdA2, "c.txt"), []byte("last turn\n"), 0o600)
			res, err := a.Deliver(ctx, run, prOpts, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Changed || res.Delivery.State != store.DeliveryOpened {
				t.Fatalf("deliver = %+v", res)
			}
			final := git(t, origin, "rev-parse", branch)
			if final != res.Delivery.CommitSHA || git(t, origin, "rev-parse", final+"^") != tipB {
				t.Fatalf("the delivered commit %s is not on top of the parked work", final)
			}
			if files := git(t, origin, "ls-tree", "--name-only", final); files != "README.md\na.txt\nb.txt\nc.txt" {
				t.Fatalf("delivered tree: %q", files)
			}
			if n := git(t, origin, "rev-list", "--count", "main.."+final); n != "3" {
				t.Fatalf("%s commits on the branch, want 2 parked + 1 final", n)
			}
			pulls := f.gh.Pulls("acme/app")
			if len(pulls) != 1 || pulls[0].Head != res.Delivery.Branch || pulls[0].Base != "main" {
				t.Fatalf("pull requests = %+v", pulls)
			}
		})
	}
}

// TestWorkdirReplacesAStaleWorktree: the run's worktree on this instance
// is behind the work another instance parked since (machines that share
// the same paths): it is dropped, with what a dead turn left in it, and
// added again from the branch.
func TestWorkdirReplacesAStaleWorktree(t *testing.T) {
	t.Parallel()
	origin, checkout := repos(t)
	f := newFixture(t, "")
	ctx := context.Background()
	run := f.newRun(t, "r00000p2", checkout)
	wd := f.parkWork(t, run, prOpts)
	// Another machine took the run, went on and parked.
	other := filepath.Join(t.TempDir(), "other")
	git(t, filepath.Dir(other), "clone", "--quiet", "--branch", "orchestrator/nightly-deps/r00000p2", origin, other)
	os.WriteFile(filepath.Join(other, "b.txt"), []byte("b"), 0o600)
	git(t, other, "add", ".")
	git(t, other, "commit", "--quiet", "-m", "work in progress")
	git(t, other, "push", "--quiet", "origin", "HEAD")
	dl, _, _ := f.st.Delivery(ctx, run.ID)
	dl.CommitSHA = git(t, other, "rev-parse", "HEAD")
	if err := f.st.SaveDelivery(ctx, dl); err != nil {
		t.Fatal(err)
	}
	// What this instance left of a turn it did not finish.
	os.WriteFile(filepath.Join(wd, "dead.txt"), []byte("x"), 0o600)

	again, err := f.d.Workdir(ctx, run, prOpts)
	if err != nil || again != wd {
		t.Fatalf("Workdir = %s, %v", again, err)
	}
	if head := git(t, wd, "rev-parse", "HEAD"); head != dl.CommitSHA {
		t.Fatalf("worktree at %s, want the parked %s", head, dl.CommitSHA)
	}
	if !exists(filepath.Join(wd, "b.txt")) || exists(filepath.Join(wd, "dead.txt")) {
		t.Fatal("the worktree was not replaced by the parked work")
	}
	// A worktree that holds the parked work (and more, the agent's own
	// commit) is used as it is.
	os.WriteFile(filepath.Join(wd, "c.txt"), []byte("c"), 0o600)
	git(t, wd, "add", ".")
	git(t, wd, "commit", "--quiet", "-m", "the agent's commit")
	os.WriteFile(filepath.Join(wd, "d.txt"), []byte("d"), 0o600)
	if _, err := f.d.Workdir(ctx, run, prOpts); err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(wd, "c.txt")) || !exists(filepath.Join(wd, "d.txt")) {
		t.Fatal("a worktree holding the parked work was replaced")
	}
}

// TestParkWithoutPushKeepsTheWorkHere: a run delivered without a push is
// not parked; its work stays in its worktree, uncommitted.
func TestParkWithoutPushKeepsTheWorkHere(t *testing.T) {
	t.Parallel()
	origin, checkout := repos(t)
	f := newFixture(t, "")
	ctx := context.Background()
	run := f.newRun(t, "r00000p3", checkout)
	opts := Options{}
	wd := f.parkWork(t, run, opts)
	if out := git(t, origin, "branch", "--list", "orchestrator/*"); out != "" {
		t.Fatalf("branches on origin: %s", out)
	}
	if s := git(t, wd, "status", "--porcelain"); s != "?? a.txt" {
		t.Fatalf("worktree status %q", s)
	}
	if dl, _, _ := f.st.Delivery(ctx, run.ID); dl.Pushed || dl.CommitSHA != "" {
		t.Fatalf("delivery = %+v", dl)
	}
	// A run with no worktree yet has nothing to park.
	if err := f.d.Park(ctx, f.newRun(t, "r00000p4", checkout), prOpts); err != nil {
		t.Fatal(err)
	}
}

// TestParkRefusesAStaleWorktree: a worktree of ours that is behind the
// work parked since elsewhere is never committed and pushed over it.
func TestParkRefusesAStaleWorktree(t *testing.T) {
	t.Parallel()
	origin, checkout := repos(t)
	f := newFixture(t, "")
	ctx := context.Background()
	run := f.newRun(t, "r00000p5", checkout)
	wd := f.parkWork(t, run, prOpts)
	dl, _, _ := f.st.Delivery(ctx, run.ID)
	dl.CommitSHA = strings.Repeat("1", 40) // parked elsewhere since
	if err := f.st.SaveDelivery(ctx, dl); err != nil {
		t.Fatal(err)
	}
	tip := git(t, origin, "rev-parse", "refs/heads/"+dl.Branch)
	os.WriteFile(filepath.Join(wd, "stale.txt"), []byte("x"), 0o600)
	if err := f.d.Park(ctx, run, prOpts); err == nil || !strings.Contains(err.Error(), "behind") {
		t.Fatalf("park of a stale worktree: %v", err)
	}
	if got := git(t, origin, "rev-parse", "refs/heads/"+dl.Branch); got != tip {
		t.Fatal("a stale worktree was pushed")
	}
}

// TestParkPushesOverHTTPSThroughAskpass: the work in progress is pushed
// with the token handed to git through askpass, and fetched again so by
// another instance, never written in a repository's configuration.
func TestParkPushesOverHTTPSThroughAskpass(t *testing.T) {
	t.Parallel()
	origin, checkout := repos(t)
	const token = "tok-park-456"
	url := gitHTTP(t, filepath.Dir(origin), token) + "/origin.git"
	git(t, checkout, "remote", "set-url", "origin", url)
	other := filepath.Join(t.TempDir(), "b")
	git(t, checkout, "clone", "--quiet", origin, other)
	git(t, other, "remote", "set-url", "origin", url)
	f := newFixture(t, token)
	ctx := context.Background()
	run := f.newRun(t, "r00000p6", checkout)
	f.parkWork(t, run, prOpts)
	b, err := New(Config{Store: f.st, Token: token, Root: filepath.Join(t.TempDir(), "worktrees"),
		LocalWorkDir: func(store.Run) string { return other }})
	if err != nil {
		t.Fatal(err)
	}
	wdB, err := b.Workdir(ctx, run, prOpts)
	if err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(wdB, "a.txt")) {
		t.Fatal("the other instance's worktree lacks the parked work")
	}
	for _, dir := range []string{checkout, other} {
		if cfg, _ := os.ReadFile(filepath.Join(dir, ".git", "config")); strings.Contains(string(cfg), token) {
			t.Fatalf("the token is in %s's config", filepath.Base(dir))
		}
	}
}

// parkWork prepares run's worktree, writes a.txt in it (the work of a
// turn) and parks the run with opts, failing the test on any error; it
// returns the worktree.
func (f *fixture) parkWork(t *testing.T, run store.Run, opts Options) string {
	t.Helper()
	ctx := context.Background()
	wd, err := f.d.Workdir(ctx, run, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wd, "a.txt"), []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.d.Park(ctx, run, opts); err != nil {
		t.Fatal(err)
	}
	return wd
}
