package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// firstContent is what the first turn writes to first.txt: the resumed
// turn, on another instance, prints it back with cat.
const firstContent = "first-turn-work-7f3a"

// movingRules: "Write the first file" makes the model write first.txt with
// Bash, then ask; the answer makes it print first.txt (cat) and write
// second.txt; that tool output ends the run. Rules match the last user
// message (a prompt or a tool's output), the most specific first.
func movingRules() []fakeapi.Rule {
	return []fakeapi.Rule{
		{When: "wrote-second-file", Reply: fakeapi.Reply{Text: "Implemented with JWT, on top of the first turn's work."}},
		{When: "wrote-first-file", Reply: fakeapi.Reply{Text: "First file written. I need a decision.\n" + authMarker}},
		{When: answerRule, Reply: fakeapi.Reply{Text: "Going on from the first turn's work.", ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{
			"command": "cat first.txt && echo second > second.txt && echo wrote-second-file", "description": "Read first.txt, write second.txt"}}}},
		{When: "Write the first file", Reply: fakeapi.Reply{Text: "Writing the first file.", ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{
			"command": "echo " + firstContent + " > first.txt && echo wrote-first-file", "description": "Write first.txt"}}}},
	}
}

// newOrigin makes a bare repository (origin, one commit on main) and a
// clone of it (the checkout runs work from) under dir.
func newOrigin(t *testing.T, dir string) (origin, checkout string) {
	t.Helper()
	clitest.Git(t)
	origin, checkout = filepath.Join(dir, "origin.git"), filepath.Join(dir, "checkout")
	seed := filepath.Join(dir, "seed")
	gitCmd(t, dir, "init", "--quiet", "--bare", "--initial-branch=main", origin)
	gitCmd(t, dir, "init", "--quiet", "--initial-branch=main", seed)
	if err := os.WriteFile(filepath.Join(seed, "README.md"), []byte("app\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, seed, "add", ".")
	gitCmd(t, seed, "commit", "--quiet", "-m", "first")
	gitCmd(t, seed, "push", "--quiet", origin, "main")
	gitCmd(t, dir, "clone", "--quiet", origin, checkout)
	return origin, checkout
}

// under reports whether path is inside dir.
func under(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// TestClusterGitRunMovesToAnotherInstance: a run delivered through git (its
// branch pushed to origin) writes first.txt in its first turn, then asks
// and parks: its work in progress is committed and pushed, and it waits
// with no lease. The instance that ran the turn is killed (SIGKILL), so
// the run must move; the answer, from a fourth process, resumes it on
// another instance, whose worktree holds first.txt (the model's cat prints
// it back); the run ends done, the answer delivered once, and the run's
// branch on origin has both files.
//
// The instances share the checkout (one machine): the next one removes the
// killed one's worktree of the run, which keeps the branch checked out.
// With "machine gone", the killed instance's worktree and the run's local
// branch are deleted too, as if it had been on a machine of its own: the
// work can come from origin only.
func TestClusterGitRunMovesToAnotherInstance(t *testing.T) {
	t.Parallel()
	for _, gone := range []bool{false, true} {
		name := "shared clone"
		if gone {
			name = "machine gone"
		}
		t.Run(name, func(t *testing.T) { testGitRunMoves(t, gone) })
	}
}

func testGitRunMoves(t *testing.T, machineGone bool) {
	c := newCluster(t, 3, "", movingRules()...)
	origin, checkout := newOrigin(t, c.e.dir)
	spec := filepath.Join(c.e.dir, "moves.md")
	body := fmt.Sprintf("---\nname: moves\nworkdir: %q\nallowed_tools: [Bash]\nsurfaces: [terminal]\ngit:\n  push: true\n---\nWrite the first file\n", checkout)
	if err := os.WriteFile(spec, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, in := range c.nodes {
		c.start(in)
	}
	defer func() {
		if t.Failed() {
			for _, in := range c.nodes {
				t.Logf("%s:\n%s", in.name, in.out.String())
			}
		}
	}()
	st := c.store()
	ctx := context.Background()
	runID := strings.TrimSpace(c.command("submit", spec))

	var set store.SetRecord
	waitFor(t, "the run waiting on its question with no lease", func() bool {
		sets, _ := st.QuestionSets(ctx, store.SetFilter{RunID: runID, State: []store.SetState{store.SetPending}})
		r, err := st.Run(ctx, runID)
		_, leased, lerr := st.RunLease(ctx, runID)
		if len(sets) != 1 || err != nil || r.Status != store.RunWaiting || lerr != nil || leased {
			return false
		}
		set = sets[0]
		return true
	})
	// The first turn's work is parked: committed on the run's branch and
	// pushed to origin.
	dl, ok, err := st.Delivery(ctx, runID)
	if err != nil || !ok || !dl.Pushed || dl.CommitSHA == "" {
		t.Fatalf("delivery of the waiting run = %+v, %v, %v; want its work in progress pushed", dl, ok, err)
	}
	if got := gitCmd(t, origin, "show", dl.Branch+":first.txt"); got != firstContent {
		t.Fatalf("first.txt on origin's %s = %q, want %q (parked)", dl.Branch, got, firstContent)
	}

	// The instance that ran the first turn: its worktree and the turn's
	// transcript are under its state directory.
	turns, err := st.Turns(ctx, runID)
	if err != nil || len(turns) != 1 {
		t.Fatalf("turns %+v, %v; want the first one", turns, err)
	}
	var first *instance
	for _, in := range c.nodes {
		if under(dl.Worktree, in.state) {
			first = in
		}
	}
	if first == nil || !under(turns[0].TranscriptPath, first.state) {
		t.Fatalf("worktree %s, transcript %s: not under one instance's state directory", dl.Worktree, turns[0].TranscriptPath)
	}
	c.kill(first)
	t.Logf("the first turn ran on %s, killed", first.name)
	if machineGone {
		gitCmd(t, checkout, "worktree", "remove", "--force", "--force", dl.Worktree)
		gitCmd(t, checkout, "branch", "--quiet", "-D", dl.Branch)
		if err := os.RemoveAll(first.state); err != nil {
			t.Fatal(err)
		}
	}

	c.command("answer", set.Set.Questions[0].ID, "2")
	waitFor(t, "the run done on another instance", func() bool {
		r, err := st.Run(ctx, runID)
		return err == nil && (r.Status == store.RunDone || r.Status == store.RunFailed)
	})
	r, _ := st.Run(ctx, runID)
	if r.Status != store.RunDone || !strings.Contains(r.FinalText, "on top of the first turn's work") {
		t.Fatalf("run %s %q (error %q), want done with the last turn's text", r.Status, r.FinalText, r.Error)
	}
	if n := c.e.answerRequests(); n != 1 {
		t.Errorf("the answer reached the model %d times, want 1", n)
	}
	if rec, err := st.QuestionSet(ctx, set.Set.ID); err != nil || rec.State != store.SetResumed {
		t.Errorf("the set is %s (%v), want resumed", rec.State, err)
	}

	// The resumed turn ran on another instance, in a worktree of its own
	// that held the first turn's file: cat printed it to the model.
	turns, _ = st.Turns(ctx, runID)
	if len(turns) != 2 {
		t.Fatalf("%d turns, want 2", len(turns))
	}
	if under(turns[1].TranscriptPath, first.state) {
		t.Errorf("the answer's turn ran on %s, the killed instance (transcript %s)", first.name, turns[1].TranscriptPath)
	}
	saw := false
	for _, req := range c.e.fake.Requests() {
		if strings.Contains(req.LastUserText, "wrote-second-file") {
			saw = saw || strings.Contains(req.LastUserText, firstContent)
		}
	}
	if !saw {
		t.Errorf("the resumed turn's cat did not print first.txt (%q): its worktree lacked the first turn's work", firstContent)
	}
	// The instance that took the run added its worktree from the run's
	// branch: the shared clone's local one, or origin's when the killed
	// instance's machine is gone.
	from := "refs/heads/" + dl.Branch
	if machineGone {
		from = "refs/remotes/origin/" + dl.Branch
	}
	moved := 0
	for _, in := range c.nodes {
		if in != first && strings.Contains(in.out.String(), "from="+from) {
			moved++
		}
	}
	if moved != 1 {
		t.Errorf("%d instances say they added the run's worktree from %s, want 1", moved, from)
	}
	// Nothing about the run went wrong on the way (a park or a worktree
	// that failed is only a warning).
	trouble := regexp.MustCompile(`level=(WARN|ERROR).*run=` + runID)
	for _, in := range c.nodes {
		if m := trouble.FindString(in.out.String()); m != "" {
			t.Errorf("%s: %s", in.name, m)
		}
	}

	// The run's branch on origin carries both files.
	dl, _, _ = st.Delivery(ctx, runID)
	if under(dl.Worktree, first.state) {
		t.Errorf("the delivery's worktree %s is still the killed instance's", dl.Worktree)
	}
	if dl.State == store.DeliveryPrepared {
		t.Errorf("delivery state %s, want past the commit", dl.State)
	}
	if got := gitCmd(t, origin, "show", dl.Branch+":first.txt"); got != firstContent {
		t.Errorf("first.txt on origin's %s = %q, want %q", dl.Branch, got, firstContent)
	}
	if got := gitCmd(t, origin, "show", dl.Branch+":second.txt"); got != "second" {
		t.Errorf("second.txt on origin's %s = %q, want second", dl.Branch, got)
	}
	if got := gitCmd(t, origin, "merge-base", "--is-ancestor", "main", dl.Branch); got != "" {
		t.Errorf("merge-base: %s", got)
	}
	// The person's checkout is untouched.
	if b := gitCmd(t, checkout, "branch", "--show-current"); b != "main" {
		t.Errorf("checkout on branch %s, want main", b)
	}
	if s := gitCmd(t, checkout, "status", "--porcelain"); s != "" {
		t.Errorf("checkout not clean:\n%s", s)
	}
}
