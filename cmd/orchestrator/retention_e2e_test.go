package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestGCRetentionAfterRealRuns (issue 24, done-when 7, with the real
// CLI): a run delivered through git (pushed, a pull request) and a run
// left waiting on its question; with a retention of a nanosecond, gc
// removes the done run's transcripts, rows and local branch, and leaves
// the waiting run whole: it is answered and resumed after, and delivers.
func TestGCRetentionAfterRealRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGitE2E(t)
	if code, _, _ := g.run("", "run", g.presetSpec("deps", "Implement spec X", "")); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	done := g.onlyRun()
	dl, _ := g.wantDelivered(t, done)
	if got := gitCmd(t, g.checkout, "branch", "--list", dl.Branch); got == "" {
		t.Fatalf("no local branch %s after the delivery", dl.Branch)
	}
	if code, _, _ := g.run("", "run", "--surface", "terminal", g.spec("later", "Implement spec X", "")); code != exitWaiting {
		t.Fatalf("second run: exit %d, want %d (waiting)", code, exitWaiting)
	}
	var waiting store.Run
	runs, err := g.store().ListRuns(ctx, store.RunFilter{Status: []store.RunStatus{store.RunWaiting}})
	if err != nil || len(runs) != 1 {
		t.Fatalf("waiting runs = %v, %v", runs, err)
	}
	waiting = runs[0]
	wdl, _, _ := g.store().Delivery(ctx, waiting.ID)

	cfg, err := os.ReadFile(g.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.config, append(cfg, "\nretention:\n  transcripts: 1ns\n  runs: 1ns\n  branches: 1ns\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := g.run("", "gc")
	if code != 0 {
		t.Fatalf("gc: exit %d\n%s", code, errs)
	}
	for _, want := range []string{"removed branch " + dl.Branch + " in ", "(run " + done.ID + ", pushed)", "transcript files", "removed run " + done.ID, "freed "} {
		if !strings.Contains(out, want) {
			t.Errorf("gc output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, waiting.ID) {
		t.Errorf("gc removed something of the waiting run:\n%s", out)
	}
	if got := gitCmd(t, g.checkout, "branch", "--list", dl.Branch); got != "" {
		t.Errorf("local branch %s left", dl.Branch)
	}
	if got := gitCmd(t, g.origin, "branch", "--list", dl.Branch); got == "" {
		t.Errorf("gc touched the remote's branch %s", dl.Branch)
	}
	if _, err := g.store().Run(ctx, done.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the done run: %v, want removed", err)
	}
	if _, err := os.Stat(filepath.Join(g.state, "transcripts", done.ID)); !os.IsNotExist(err) {
		t.Errorf("the done run's transcripts: %v, want removed", err)
	}
	if fs, err := os.ReadDir(filepath.Join(g.state, "transcripts", waiting.ID)); err != nil || len(fs) == 0 {
		t.Errorf("the waiting run's transcripts: %d, %v", len(fs), err)
	}
	if _, err := os.Stat(wdl.Worktree); err != nil {
		t.Errorf("the waiting run's worktree: %v", err)
	}

	// The waiting run goes on as if gc had not run.
	sets, err := g.store().OpenSets(ctx, waiting.ID)
	if err != nil || len(sets) != 1 {
		t.Fatalf("the waiting run's open sets = %v, %v", sets, err)
	}
	if code, _, errs := g.run("", "answer", sets[0].Set.Questions[0].ID, "JWT"); code != 0 {
		t.Fatalf("answer: exit %d\n%s", code, errs)
	}
	if code, _, errs := g.run("", "resume", waiting.ID); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, errs)
	}
	after, err := g.store().Run(ctx, waiting.ID)
	if err != nil || after.Status != store.RunDone {
		t.Fatalf("the resumed run: %+v, %v", after.Status, err)
	}
	g.wantDelivered(t, after)
}
