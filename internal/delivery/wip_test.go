package delivery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestParkWhosePushFailedLosesNoCommit: instance A runs a turn and parks,
// but its push fails (origin unreachable for a moment): the store records
// the work-in-progress commit as not on origin and ties the run to A's
// host. Then A dies, and instance B (its own worktree root) takes the run:
//
//   - sharing A's clone, B goes on from the run's local branch, which holds
//     the commit: nothing is lost, and the run is delivered from B;
//   - with a clone of its own, B cannot have the commit: Workdir refuses
//     (store.ErrWorkElsewhere, naming the host) instead of starting again
//     from the base, and the run stays tied to A's host; when A parks again
//     (its push now succeeds), the run is untied and B goes on from origin.
//
// In no case is the run's branch recreated without the commit.
func TestParkWhosePushFailedLosesNoCommit(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{true, false} {
		name := map[bool]string{false: "a clone each", true: "one clone"}[shared]
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
			run := f.newRun(t, "r00000w1", checkoutA)
			branch := "orchestrator/nightly-deps/r00000w1"

			wdA, err := a.Workdir(ctx, run, prOpts)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(wdA, "a.txt"), []byte("first turn\n"), 0o600)
			away := origin + ".away"
			if err := os.Rename(origin, away); err != nil {
				t.Fatal(err)
			}
			perr := a.Park(ctx, run, prOpts)
			if err := os.Rename(away, origin); err != nil {
				t.Fatal(err)
			}
			if perr == nil || !strings.Contains(perr.Error(), "stays on host "+store.Hostname()) {
				t.Fatalf("park with origin away: %v, want the failed push and where the work stays", perr)
			}
			wip := git(t, wdA, "rev-parse", "HEAD")
			dl, _, _ := f.st.Delivery(ctx, run.ID)
			if dl.State != store.DeliveryPrepared || dl.CommitSHA != wip || dl.Pushed || dl.CommitSHA == dl.BaseCommit {
				t.Fatalf("delivery after the failed park = %+v; want the WIP commit %s recorded, not pushed", dl, wip)
			}
			if r, _ := f.st.Run(ctx, run.ID); r.Host != store.Hostname() {
				t.Fatalf("run host %q, want %q: the WIP commit is on this host only", r.Host, store.Hostname())
			}
			// A dies; B takes the run (run.Host as the store now has it).
			run, _ = f.st.Run(ctx, run.ID)
			wdB, err := b.Workdir(ctx, run, prOpts)
			if !shared {
				if !errors.Is(err, store.ErrWorkElsewhere) || !strings.Contains(err.Error(), "stays with host "+store.Hostname()) ||
					!strings.Contains(err.Error(), wip[:12]) {
					t.Fatalf("B's Workdir = %s, %v; want it refused, naming the host and the commit", wdB, err)
				}
				if _, ok := resolveIn(t, checkoutB, "refs/heads/"+branch); ok {
					t.Errorf("B created the run's branch in its clone without the work")
				}
				// The commit is still A's; A parks again, now with origin
				// reachable: the run is untied and B goes on from origin.
				if err := a.Park(ctx, run, prOpts); err != nil {
					t.Fatal(err)
				}
				if got := git(t, origin, "rev-parse", "refs/heads/"+branch); got != wip {
					t.Fatalf("origin's branch at %s, want the WIP %s", got, wip)
				}
				if r, _ := f.st.Run(ctx, run.ID); r.Host != "" {
					t.Fatalf("run host %q after the push, want untied", r.Host)
				}
				run, _ = f.st.Run(ctx, run.ID)
				if wdB, err = b.Workdir(ctx, run, prOpts); err != nil {
					t.Fatal(err)
				}
			} else if err != nil {
				t.Fatalf("B's Workdir in the shared clone: %v", err)
			}
			if got, _ := os.ReadFile(filepath.Join(wdB, "a.txt")); string(got) != "first turn\n" {
				t.Fatalf("B's worktree lacks the first turn's work: %q", got)
			}
			if head := git(t, wdB, "rev-parse", "HEAD"); head != wip {
				t.Fatalf("B's worktree at %s, want the WIP commit %s", head, wip)
			}
			os.WriteFile(filepath.Join(wdB, "b.txt"), []byte("second turn\n"), 0o600)
			res, err := b.Deliver(ctx, run, prOpts, nil)
			if err != nil || res.Pending || res.Delivery.State != store.DeliveryOpened {
				t.Fatalf("B's delivery = %+v, %v", res.Delivery, err)
			}
			final := git(t, origin, "rev-parse", "refs/heads/"+branch)
			if git(t, origin, "rev-parse", final+"^") != wip {
				t.Fatalf("the delivered commit is not on top of the WIP commit")
			}
			if files := git(t, origin, "ls-tree", "--name-only", final); files != "README.md\na.txt\nb.txt" {
				t.Fatalf("delivered tree: %q", files)
			}
		})
	}
}

// TestWorkdirNeverResetsABranchAhead: the run's local branch holds a commit
// nothing recorded (an instance died between its commit and the store's
// write): another instance sharing the clone goes on from that branch
// instead of resetting it to the base.
func TestWorkdirNeverResetsABranchAhead(t *testing.T) {
	t.Parallel()
	_, checkout := repos(t)
	f := newFixture(t, "")
	a, b := f.d, f.otherInstance(t, checkout)
	ctx := context.Background()
	run := f.newRun(t, "r00000w2", checkout)
	wdA, err := a.Workdir(ctx, run, prOpts)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wdA, "a.txt"), []byte("unrecorded\n"), 0o600)
	git(t, wdA, "add", ".")
	git(t, wdA, "commit", "--quiet", "-m", "work nobody recorded")
	lost := git(t, wdA, "rev-parse", "HEAD")
	wdB, err := b.Workdir(ctx, run, prOpts)
	if err != nil {
		t.Fatal(err)
	}
	if head := git(t, wdB, "rev-parse", "HEAD"); head != lost {
		t.Fatalf("B's worktree at %s, want the branch's commit %s (never reset to the base)", head, lost)
	}
}

// resolveIn resolves rev in dir.
func resolveIn(t *testing.T, dir, rev string) (string, bool) {
	t.Helper()
	return Git{}.resolve(context.Background(), dir, rev)
}
