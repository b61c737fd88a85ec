package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestGCRetention (issue 24, done-when 7): with a short retention, gc
// removes the old transcripts, the rows of old finished runs and their
// local branches (a pushed one, and one of a run that ended long ago),
// and keeps everything of a waiting run and a running one, however old,
// a branch someone moved on, and a recent run. --dry-run lists the same
// and removes nothing.
func TestGCRetention(t *testing.T) {
	t.Parallel()
	clitest.Git(t)
	ctx := context.Background()
	tm := newTestMain(t)
	state := filepath.Join(tm.Dir, "state")
	checkout := filepath.Join(tm.Dir, "checkout")
	tm.write(t, DefaultConfigFile, fmt.Sprintf("state_dir: %q\nretention:\n  transcripts: 1h\n  runs: 1h\n  branches: 1h\n", state))
	gitCmd(t, tm.Dir, "init", "--quiet", "--initial-branch=main", checkout)
	os.WriteFile(filepath.Join(checkout, "README.md"), []byte("app\n"), 0o600)
	gitCmd(t, checkout, "add", ".")
	gitCmd(t, checkout, "commit", "--quiet", "-m", "first")
	base := gitCmd(t, checkout, "rev-parse", "HEAD")

	st, err := store.Open(ctx, state)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-3 * time.Hour)
	// run makes a run in status with a transcript and, when branch is
	// set, a branch of its own in the checkout at a commit of its own.
	run := func(id string, status store.RunStatus, pushed bool) string {
		if _, err := st.CreateRun(ctx, store.Run{ID: id, Prompt: "p"}); err != nil {
			t.Fatal(err)
		}
		turn, err := st.BeginTurn(ctx, store.Turn{RunID: id, Kind: store.TurnStart, Prompt: "p", SessionID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		var set *questions.Set
		if status == store.RunWaiting {
			set = &questions.Set{ID: id + "-set", RunID: id, Turn: turn.Seq, Questions: []questions.Question{{ID: "q1", Text: "Which?",
				Options: []questions.Option{{Label: "A"}, {Label: "B"}}}}}
		}
		if err := st.FinishTurn(ctx, id, turn.Seq, store.TurnResult{Status: "success", SessionID: "s"}, set, []string{"terminal"}); err != nil {
			t.Fatal(err)
		}
		tr := filepath.Join(state, "transcripts", id, "001-start.ndjson")
		os.MkdirAll(filepath.Dir(tr), 0o700)
		if err := os.WriteFile(tr, []byte(strings.Repeat("{}\n", 1000)), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(tr, old, old)
		branch := "orchestrator/" + id
		gitCmd(t, checkout, "branch", branch, base)
		gitCmd(t, checkout, "commit", "--quiet", "--allow-empty", "-m", id) // the run's own commit, on main…
		sha := gitCmd(t, checkout, "rev-parse", "HEAD")
		gitCmd(t, checkout, "update-ref", "refs/heads/"+branch, sha) // …and its branch's
		gitCmd(t, checkout, "reset", "--quiet", "--hard", base)
		dl := store.Delivery{RunID: id, RepoDir: checkout, Worktree: filepath.Join(state, "worktrees", id), Branch: branch,
			BaseCommit: base, State: store.DeliveryCommitted, CommitSHA: sha, Pushed: pushed}
		if status.Final() {
			dl.RemovedAt = old
		}
		if pushed {
			dl.State = store.DeliveryPushed
		}
		if err := st.SaveDelivery(ctx, dl); err != nil {
			t.Fatal(err)
		}
		if status != store.RunWaiting {
			if err := st.UpdateRun(ctx, id, store.RunUpdate{Status: status}); err != nil {
				t.Fatal(err)
			}
		}
		return branch
	}
	pushedBr := run("old-pushed", store.RunDone, true)
	endedBr := run("old-failed", store.RunFailed, false)
	movedBr := run("old-moved", store.RunDone, true)
	gitCmd(t, checkout, "update-ref", "refs/heads/"+movedBr, base) // someone moved it
	waitingBr := run("waiting", store.RunWaiting, false)
	runningBr := run("running", store.RunRunning, false)
	recentBr := run("recent", store.RunCancelled, false)
	st.Close()

	// Age everything but the recent run, as a clock three hours on would.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(state, store.FileName)+"?_pragma=busy_timeout(15000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE runs SET updated_at = ?, created_at = ? WHERE id <> 'recent'`, old.UnixNano(), old.UnixNano()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	recentTr := filepath.Join(state, "transcripts", "recent", "001-start.ndjson")
	now := time.Now()
	os.Chtimes(recentTr, now, now)
	stray := filepath.Join(state, "transcripts", "20200101T000000.000000000Z.ndjson")
	os.WriteFile(stray, []byte("{}\n"), 0o600)
	os.Chtimes(stray, old, old)

	// gc runs as its own process each time: a Main of its own.
	gc := func(args ...string) (int, string) {
		g := newTestMain(t)
		g.Dir, g.LookupEnv = tm.Dir, tm.LookupEnv
		code := g.exec(append([]string{"gc"}, args...)...)
		if code != 0 {
			t.Logf("stderr: %s", g.stderr.String())
		}
		return code, g.stdout.String()
	}
	branches := func() string { return gitCmd(t, checkout, "for-each-ref", "--format=%(refname:short)", "refs/heads/") }
	before := branches()
	code, out := gc("--dry-run")
	if code != 0 {
		t.Fatalf("gc --dry-run: exit %d", code)
	}
	for _, want := range []string{"would remove branch " + pushedBr, "would remove branch " + endedBr, "would remove 4 transcript files (8.8 KiB)",
		"would remove run old-pushed", "would remove run old-failed", "would remove run old-moved", "would free "} {
		if !strings.Contains(out, want) {
			t.Errorf("gc --dry-run output lacks %q:\n%s", want, out)
		}
	}
	if branches() != before {
		t.Fatalf("gc --dry-run removed branches")
	}
	if _, err := os.Stat(stray); err != nil {
		t.Fatalf("gc --dry-run removed a transcript: %v", err)
	}

	if code, out = gc(); code != 0 {
		t.Fatalf("gc: exit %d", code)
	}
	for _, want := range []string{"removed branch " + pushedBr + " in " + checkout + " (run old-pushed, pushed)",
		"removed branch " + endedBr + " in " + checkout + " (run old-failed, ended long ago)",
		"removed 4 transcript files", "removed run old-pushed", "freed 8.8 KiB on disk", "3 runs and "} {
		if !strings.Contains(out, want) {
			t.Errorf("gc output lacks %q:\n%s", want, out)
		}
	}
	left := branches()
	for _, b := range []string{pushedBr, endedBr} {
		if strings.Contains(left, b) {
			t.Errorf("branch %s left:\n%s", b, left)
		}
	}
	for _, b := range []string{movedBr, waitingBr, runningBr, recentBr, "main"} {
		if !strings.Contains(left, b) {
			t.Errorf("branch %s removed:\n%s", b, left)
		}
	}
	for _, id := range []string{"old-pushed", "old-failed"} {
		if _, err := os.Stat(filepath.Join(state, "transcripts", id)); !os.IsNotExist(err) {
			t.Errorf("transcripts of %s: %v, want gone", id, err)
		}
	}
	for _, id := range []string{"waiting", "running", "recent"} {
		if _, err := os.Stat(filepath.Join(state, "transcripts", id, "001-start.ndjson")); err != nil {
			t.Errorf("transcript of %s: %v, want kept", id, err)
		}
	}
	st, err = store.Open(ctx, state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, id := range []string{"old-pushed", "old-failed", "old-moved"} {
		if _, err := st.Run(ctx, id); err == nil {
			t.Errorf("run %s kept, want removed", id)
		}
	}
	for _, id := range []string{"waiting", "running", "recent"} {
		if _, err := st.Run(ctx, id); err != nil {
			t.Errorf("run %s: %v, want kept", id, err)
		}
	}
	if sets, err := st.OpenSets(ctx, "waiting"); err != nil || len(sets) != 1 {
		t.Errorf("the waiting run's open sets = %d, %v", len(sets), err)
	}

	// status shows the state directory's size: the transcripts left are
	// the three kept runs' (3000 bytes each).
	sm := newTestMain(t)
	sm.Dir, sm.LookupEnv = tm.Dir, tm.LookupEnv
	if code := sm.exec("status", "--json"); code != 0 {
		t.Fatalf("status --json: exit %d\n%s", code, sm.stderr.String())
	}
	var rep struct {
		StateDir *statusStateDir `json:"state_dir"`
	}
	if err := json.Unmarshal(sm.stdout.Bytes(), &rep); err != nil || rep.StateDir == nil ||
		rep.StateDir.TranscriptsBytes != 9000 || rep.StateDir.Bytes <= rep.StateDir.TranscriptsBytes {
		t.Fatalf("status --json state_dir = %+v, %v", rep.StateDir, err)
	}
	sm = newTestMain(t)
	sm.Dir, sm.LookupEnv = tm.Dir, tm.LookupEnv
	if code := sm.exec("status"); code != 0 || !strings.Contains(sm.stdout.String(), "State directory: ") ||
		!strings.Contains(sm.stdout.String(), "(transcripts 8.8 KiB, worktrees 0 B;") {
		t.Fatalf("status: exit %d\n%s", code, sm.stdout.String())
	}
	if code, out := gc(); code != 0 || !strings.Contains(out, "nothing to remove") {
		t.Fatalf("second gc: exit %d\n%s", code, out)
	}
}

// TestServeGCLoopRunsAtOnceThenWaits: serve's gc runs when it starts (it
// removes an old finished run and keeps an old waiting one), then waits
// for its next day, and ends with its context.
func TestServeGCLoopRunsAtOnceThenWaits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tm := newTestMain(t)
	tm.Config = config.DefaultEnv(tm.LookupEnv)
	tm.Config.Retention.Runs = config.Duration(time.Hour)
	tm.Logger = slog.New(slog.DiscardHandler)
	state := filepath.Join(tm.Dir, "state")
	st := openTestStore(t, state)
	for _, id := range []string{"old-done", "old-waiting"} {
		if _, err := st.CreateRun(ctx, store.Run{ID: id, Prompt: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.UpdateRun(ctx, "old-done", store.RunUpdate{Status: store.RunDone}); err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateRun(ctx, "old-waiting", store.RunUpdate{Status: store.RunWaiting}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(state, store.FileName)+"?_pragma=busy_timeout(15000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE runs SET updated_at = ?`, time.Now().Add(-2*time.Hour).UnixNano()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	ran := make(chan gcReport, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tm.gcLoop(ctx, st, 24*time.Hour, gcAll, func(rep gcReport, err error) {
			if err != nil {
				t.Errorf("gc: %v", err)
			}
			ran <- rep
		})
	}()
	select {
	case rep := <-ran:
		if len(rep.Runs) != 1 || rep.Runs[0].ID != "old-done" {
			t.Fatalf("gc removed %+v, want old-done", rep.Runs)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve's gc did not run at start")
	}
	if _, err := st.Run(ctx, "old-waiting"); err != nil {
		t.Fatalf("the waiting run: %v", err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the gc loop did not end with its context")
	}
	if len(ran) != 0 {
		t.Fatal("gc ran again before its day")
	}
}

// TestGCHereLeavesOtherMachinesWorktrees: on a store several instances
// share, serve's gc on each machine removes only the worktrees it finds
// there: the record of one it does not find (another machine's) is left
// for that machine, where plain gc takes a missing worktree as removed.
func TestGCHereLeavesOtherMachinesWorktrees(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := newTestMain(t)
	tm.Config = config.DefaultEnv(tm.LookupEnv)
	tm.Logger = slog.New(slog.DiscardHandler)
	state := filepath.Join(tm.Dir, "state")
	st := openTestStore(t, state)
	if _, err := st.CreateRun(ctx, store.Run{ID: "elsewhere", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveDelivery(ctx, store.Delivery{RunID: "elsewhere", RepoDir: filepath.Join(tm.Dir, "repo"),
		Worktree: filepath.Join(tm.Dir, "not-here"), Branch: "orchestrator/x", State: store.DeliveryCommitted}); err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateRun(ctx, "elsewhere", store.RunUpdate{Status: store.RunFailed}); err != nil {
		t.Fatal(err)
	}
	kept := func() int {
		k, err := st.KeptWorktrees(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(k)
	}
	if _, err := tm.collect(ctx, st, 0, false, gcParts{files: true, here: true}); err != nil {
		t.Fatal(err)
	}
	if kept() != 1 {
		t.Fatal("gc on one machine of several took another's worktree as removed")
	}
	if _, err := tm.collect(ctx, st, 0, false, gcAll); err != nil {
		t.Fatal(err)
	}
	if kept() != 0 {
		t.Fatal("plain gc kept the record of a missing worktree")
	}
}
