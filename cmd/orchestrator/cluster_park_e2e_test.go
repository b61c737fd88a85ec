package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestClusterGitParkPushFailedLosesNoWork: a run delivered through git
// writes first.txt in its first turn, whose Bash command also takes origin
// away (a remote unreachable for a moment): the park's push fails, its
// work-in-progress commit is only in the instance's clone. The store
// records the commit as not on origin and ties the run to its host, and
// `status` says why. That instance is killed (SIGKILL); origin comes back;
// the answer resumes the run on another instance, which goes on from the
// run's branch in the clone (never from the base): the run ends done and
// origin's branch has the first turn's work and the second's.
func TestClusterGitParkPushFailedLosesNoWork(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var origin string
	away := func() string {
		mu.Lock()
		defer mu.Unlock()
		return origin + ".away"
	}
	rules := movingRules()
	for i, r := range rules {
		if r.When == "Write the first file" {
			rules[i] = fakeapi.Rule{When: r.When, Respond: func(fakeapi.Request) fakeapi.Reply {
				mu.Lock()
				o := origin
				mu.Unlock()
				return fakeapi.Reply{Text: "Writing the first file.", ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{
					"command":     fmt.Sprintf("echo %s > first.txt && mv %q %q && echo wrote-first-file", firstContent, o, o+".away"),
					"description": "Write first.txt"}}}
			}}
		}
	}
	c := newCluster(t, 3, "", rules...)
	o, checkout := newOrigin(t, c.e.dir)
	mu.Lock()
	origin = o
	mu.Unlock()
	spec := filepath.Join(c.e.dir, "parkfail.md")
	body := fmt.Sprintf("---\nname: parkfail\nworkdir: %q\nallowed_tools: [Bash]\nsurfaces: [terminal]\ngit:\n  push: true\n---\nWrite the first file\n", checkout)
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
	if _, err := os.Stat(away()); err != nil {
		t.Fatalf("the first turn did not take origin away: %v", err)
	}
	// The park's push failed: the store has the commit, not on origin,
	// and the run stays with this host.
	dl, ok, err := st.Delivery(ctx, runID)
	if err != nil || !ok || dl.Pushed || dl.CommitSHA == "" || dl.CommitSHA == dl.BaseCommit || dl.State != store.DeliveryPrepared {
		t.Fatalf("delivery of the waiting run = %+v, %v, %v; want its WIP commit recorded, not pushed", dl, ok, err)
	}
	if got := gitCmd(t, checkout, "show", dl.CommitSHA+":first.txt"); got != firstContent {
		t.Fatalf("first.txt in the WIP commit = %q", got)
	}
	r, _ := st.Run(ctx, runID)
	if r.Host != store.Hostname() {
		t.Fatalf("run host %q, want %q", r.Host, store.Hostname())
	}
	out := c.command("status")
	if !strings.Contains(out, "run "+runID+": stays with host "+store.Hostname()) || !strings.Contains(out, "the push of it failed") {
		t.Errorf("status does not say why the run stays with its host:\n%s", out)
	}
	var first *instance
	for _, in := range c.nodes {
		if under(dl.Worktree, in.state) {
			first = in
		}
	}
	if first == nil {
		t.Fatalf("worktree %s is under no instance's state directory", dl.Worktree)
	}
	c.kill(first)
	t.Logf("the first turn ran on %s, killed", first.name)
	if err := os.Rename(away(), origin); err != nil {
		t.Fatal(err)
	}

	c.command("answer", set.Set.Questions[0].ID, "2")
	waitFor(t, "the run done on another instance", func() bool {
		r, err := st.Run(ctx, runID)
		return err == nil && (r.Status == store.RunDone || r.Status == store.RunFailed)
	})
	r, _ = st.Run(ctx, runID)
	if r.Status != store.RunDone || !strings.Contains(r.FinalText, "on top of the first turn's work") {
		t.Fatalf("run %s %q (error %q), want done", r.Status, r.FinalText, r.Error)
	}
	saw := false
	for _, req := range c.e.fake.Requests() {
		if strings.Contains(req.LastUserText, "wrote-second-file") {
			saw = saw || strings.Contains(req.LastUserText, firstContent)
		}
	}
	if !saw {
		t.Errorf("the resumed turn's cat did not print first.txt: its worktree lacked the first turn's work")
	}
	from := "from=refs/heads/" + dl.Branch
	moved := 0
	for _, in := range c.nodes {
		if in != first && strings.Contains(in.out.String(), from) {
			moved++
		}
	}
	if moved != 1 {
		t.Errorf("%d instances say they added the run's worktree %s, want 1", moved, from)
	}
	final, _, _ := st.Delivery(ctx, runID)
	if got := gitCmd(t, origin, "merge-base", "--is-ancestor", dl.CommitSHA, final.Branch); got != "" {
		t.Errorf("merge-base: %s", got)
	}
	if got := gitCmd(t, origin, "show", final.Branch+":first.txt"); got != firstContent {
		t.Errorf("first.txt on origin's %s = %q", final.Branch, got)
	}
	if got := gitCmd(t, origin, "show", final.Branch+":second.txt"); got != "second" {
		t.Errorf("second.txt on origin's %s = %q", final.Branch, got)
	}
	if r.Host != "" {
		t.Errorf("run host %q once delivered, want untied", r.Host)
	}
}
