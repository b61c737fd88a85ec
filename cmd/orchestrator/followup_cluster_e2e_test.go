package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestClusterFollowUpOnAnotherInstance: two instances on PostgreSQL; a run
// is done and pushed by one, which then dies with its machine (its state
// directory and the local branch gone); feedback queued from a third
// machine is taken by the other instance, which adds the run's worktree
// again from the pushed branch (the resumed turn's cat prints the first
// turn's file) and resumes the same session once; the new work is a
// second commit on the same branch on origin.
func TestClusterFollowUpOnAnotherInstance(t *testing.T) {
	t.Parallel()
	rules := []fakeapi.Rule{
		{When: "wrote-test-file", Reply: fakeapi.Reply{Text: "Added a test."}},
		{When: feedbackRule, Reply: fakeapi.Reply{Text: "Adding a test.", ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{
			"command": "cat first.txt && echo ok > auth_test.txt && echo wrote-test-file", "description": "Write auth_test.txt"}}}},
		{When: "wrote-first-file", Reply: fakeapi.Reply{Text: "First file written."}},
		{When: "Write the first file", Reply: fakeapi.Reply{Text: "Writing the first file.", ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{
			"command": "echo " + firstContent + " > first.txt && echo wrote-first-file", "description": "Write first.txt"}}}},
	}
	c := newCluster(t, 2, "", rules...)
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
	waitFor(t, "the run done", func() bool {
		r, err := st.Run(ctx, runID)
		return err == nil && r.Status.Final()
	})
	if r, _ := st.Run(ctx, runID); r.Status != store.RunDone {
		t.Fatalf("run %s (%q)", r.Status, r.Error)
	}
	dl, _, _ := st.Delivery(ctx, runID)
	turns, _ := st.Turns(ctx, runID)
	var first *instance
	for _, in := range c.nodes {
		if len(turns) > 0 && under(turns[0].TranscriptPath, in.state) {
			first = in
		}
	}
	if first == nil || !dl.Pushed {
		t.Fatalf("the run's first instance not found, or not pushed: %+v", dl)
	}
	c.kill(first)
	// Its machine is gone: its state with the run's worktree (still
	// there when it was killed before removing it), then the branch.
	if err := os.RemoveAll(first.state); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, checkout, "worktree", "prune")
	gitCmd(t, checkout, "branch", "--quiet", "-D", dl.Branch)

	c.command("followup", "--queue", "--key", "review-1", runID, "please also add a test")
	c.command("followup", "--queue", "--key", "review-1", runID, "please also add a test") // the same feedback again
	waitFor(t, "the follow-up handed over and the run done again", func() bool {
		r, err := st.Run(ctx, runID)
		fus, _ := st.FollowUps(ctx, runID)
		return err == nil && r.Status.Final() && len(fus) == 1 && fus[0].Turn > 0
	})
	r, _ := st.Run(ctx, runID)
	if r.Status != store.RunDone || r.FinalText != "Added a test." {
		t.Fatalf("run %s %q (%q)", r.Status, r.FinalText, r.Error)
	}
	fed, sawFirst := 0, false
	for _, req := range c.e.fake.Requests() {
		if strings.Contains(req.LastUserText, feedbackRule) {
			fed++
		}
		if strings.Contains(req.LastUserText, "wrote-test-file") {
			sawFirst = sawFirst || strings.Contains(req.LastUserText, firstContent)
		}
	}
	if fed != 1 || !sawFirst {
		t.Errorf("the feedback reached the model %d times (want 1); the follow-up's worktree held the first turn's work: %v", fed, sawFirst)
	}
	turns, _ = st.Turns(ctx, runID)
	if last := turns[len(turns)-1]; last.Kind != store.TurnFollowUp || under(last.TranscriptPath, first.state) || last.SessionID != turns[0].SessionID {
		t.Errorf("the follow-up turn %+v: want it on the other instance, in the first turn's session", last)
	}
	for file, want := range map[string]string{"first.txt": firstContent, "auth_test.txt": "ok"} {
		if got := gitCmd(t, origin, "show", dl.Branch+":"+file); got != want {
			t.Errorf("%s on origin's %s = %q, want %q", file, dl.Branch, got, want)
		}
	}
	if n := gitCmd(t, origin, "rev-list", "--count", "main.."+dl.Branch); n != "2" {
		t.Errorf("%s commits over main on origin's %s, want 2", n, dl.Branch)
	}
}
