package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// Approvals that outlive the process (issue 20 item 4): a live approval
// (the CLI alive, its hook holding the call) whose process is killed. The
// CLI's session then holds the call as interrupted; an answer given after
// the crash runs the call exactly once, by the model making it again.

// sideEffect is the file the approved command appends a line to: its lines
// count how many times the command ran.
const sideEffect = "ran.txt"

// retryRules: "make the file" calls Bash once; told that the call was
// interrupted and allowed, the model makes the same call again; anything
// else (a tool's result, a refusal) is echoed as the final text.
func retryRules() []fakeapi.Rule {
	call := &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{"command": "echo ran >> " + sideEffect, "description": "Record a run"}}
	return []fakeapi.Rule{
		{When: "make the file", Reply: fakeapi.Reply{Text: "Making it.", ToolUse: call}, Times: 1},
		{When: "same call again", Reply: fakeapi.Reply{Text: "Making it again.", ToolUse: call}, Times: 1},
		{Respond: func(r fakeapi.Request) fakeapi.Reply {
			return fakeapi.Reply{Text: "SAW " + strings.Join(r.ToolResults, " | ") + " " + r.LastUserText}
		}},
	}
}

// runs counts the lines the command appended.
func (e *e2e) runs() int {
	b, err := os.ReadFile(filepath.Join(e.dir, "work", sideEffect))
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "ran\n")
}

// killWhileApprovalWaits starts a run whose model calls Bash, waits until
// the approval is asked live (the terminal's input is open and silent, the
// hook holds the call), and kills the orchestrator with SIGKILL. It returns
// the run's ID and the approval's question.
func (e *e2e) killWhileApprovalWaits(t *testing.T, st *store.Store) (string, questions.Question) {
	e.t.Helper()
	cmd := e.child("", "", "run", "--prompt", "make the file", "--surface", "terminal")
	pr, pw, err := os.Pipe()
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { pw.Close() })
	cmd.Stdin = pr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	var set store.SetRecord
	waitFor(e.t, "the approval asked live", func() bool {
		sets, _ := st.QuestionSets(context.Background(), store.SetFilter{State: []store.SetState{store.SetPending}})
		if len(sets) != 1 || questions.KindOf(sets[0].Set) != questions.KindApproval {
			return false
		}
		c, err := st.ToolCall(context.Background(), sets[0].Set.Tool.ToolUseID)
		set = sets[0]
		return err == nil && !c.Deferred
	})
	if run, _ := st.Run(context.Background(), set.Set.RunID); run.Status != store.RunRunning {
		e.t.Fatalf("run %s while the approval waits live, want running", run.Status)
	}
	cmd.Process.Kill()
	wantKilled(t, cmd.Wait())
	if n := e.runs(); n != 0 {
		e.t.Fatalf("the command ran %d times before it was answered", n)
	}
	return set.Set.RunID, set.Set.Questions[0]
}

// TestLiveApprovalAnsweredAfterCrash: kill -9 while a live approval waits;
// answered Allow once, `resume` runs the command exactly once; answered
// Deny, never.
func TestLiveApprovalAnsweredAfterCrash(t *testing.T) {
	clitest.Claude(t)
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer string
		serve  bool // taken up by `serve` rather than `resume`
		runs   int
	}{
		{"allow-resume", "Allow once", false, 1},
		{"deny-resume", "Deny: not today", false, 0},
		{"allow-serve", "Allow once", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, retryRules()...)
			runID, q := e.killWhileApprovalWaits(t, e.store())
			if code, _, _ := e.run("", "answer", q.ID, tc.answer); code != 0 {
				t.Fatalf("answer exit %d", code)
			}
			if tc.serve {
				e.serveUntilFinal(t, runID)
			} else if code, out, _ := e.run("", "resume", runID); code != 0 {
				t.Fatalf("resume exit %d:\n%s", code, out)
			}
			if n := e.runs(); n != tc.runs {
				t.Fatalf("the command ran %d times, want %d", n, tc.runs)
			}
			run := e.onlyRun()
			if run.Status != store.RunDone {
				t.Fatalf("run %s %q", run.Status, run.Error)
			}
			if tc.runs == 0 && !strings.Contains(run.FinalText, "not today") {
				t.Errorf("the model was not told the reason: %q", run.FinalText)
			}
			// Resumed again: nothing runs twice.
			e.run("", "resume", runID)
			if n := e.runs(); n != tc.runs {
				t.Fatalf("after a second resume the command ran %d times, want %d", n, tc.runs)
			}
		})
	}
}

// TestLiveApprovalOnTimeoutDefaultAllows: on_timeout {action: default,
// option: Allow once} allows a live approval nobody answered: the command
// runs once.
func TestLiveApprovalOnTimeoutDefaultAllows(t *testing.T) {
	clitest.Claude(t)
	t.Parallel()
	e := newE2E(t, retryRules()...)
	spec := filepath.Join(e.dir, "work", "allowing.md")
	if err := os.WriteFile(spec, []byte("---\nname: allowing\nsurfaces: [terminal]\nquestion_timeout: 1s\non_timeout: {action: default, option: Allow once}\n---\nmake the file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := e.child("", "", "run", spec)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	cmd.Stdin = pr // open and silent: nobody answers
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if n := e.runs(); n != 1 {
		t.Fatalf("the command ran %d times, want 1", n)
	}
	if run := e.onlyRun(); run.Status != store.RunDone || !strings.Contains(run.FinalText, "SAW") {
		t.Fatalf("run %s %q %q", run.Status, run.FinalText, run.Error)
	}
}

// serveUntilFinal runs `serve` (in-process, its terminal silent) until run
// is final.
func (e *e2e) serveUntilFinal(t *testing.T, runID string) {
	t.Helper()
	e.writeConfig("serve:\n  listen: 127.0.0.1:0\n")
	stdin, stdinW := io.Pipe()
	defer stdinW.Close()
	var log lockedBuffer
	m := &Main{Stdin: stdin, Stdout: &log, Stderr: &log, Dir: filepath.Join(e.dir, "work"),
		LookupEnv: func(string) (string, bool) { return "", false }}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() { exited <- m.Exec(ctx, []string{"--config", e.config, "serve"}) }()
	defer func() {
		cancel()
		<-exited
		t.Logf("serve output:\n%s", log.String())
	}()
	st := e.store()
	waitFor(t, "the run to finish under serve", func() bool {
		run, err := st.Run(context.Background(), runID)
		return err == nil && run.Status.Final()
	})
}

// TestLiveApprovalAnsweredAfterCrashOnPostgres: the same on PostgreSQL,
// where the killed process's lease outlives it (serve.lease_ttl) while its
// CLI and hook take a moment to die: the answer, given at once, is not
// handed to the dying CLI; `resume`, once the lease has expired, runs the
// command exactly once.
func TestLiveApprovalAnsweredAfterCrashOnPostgres(t *testing.T) {
	clitest.Claude(t)
	t.Parallel()
	e := newE2E(t, retryRules()...)
	dbURL := pgtest.Schema(t)
	e.writeConfig(fmt.Sprintf("\ndatabase_url: %q\nserve:\n  lease_ttl: 3s\n", dbURL))
	st, err := store.OpenDatabase(context.Background(), e.state, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	runID, q := e.killWhileApprovalWaits(t, st)
	if code, _, _ := e.run("", "answer", q.ID, "Allow once"); code != 0 {
		t.Fatalf("answer exit %d", code)
	}
	waitFor(t, "the killed process's lease to expire", func() bool {
		driven, err := st.RunDriven(runID)
		return err == nil && !driven
	})
	if code, out, _ := e.run("", "resume", runID); code != 0 {
		t.Fatalf("resume exit %d:\n%s", code, out)
	}
	if n := e.runs(); n != 1 {
		t.Fatalf("the command ran %d times, want 1", n)
	}
	if run, _ := st.Run(context.Background(), runID); run.Status != store.RunDone {
		t.Fatalf("run %s %q", run.Status, run.Error)
	}
}
