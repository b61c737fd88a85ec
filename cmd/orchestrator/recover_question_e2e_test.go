package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestKilledBetweenTheQuestionAndItsReading: the model's reply ends with a
// question, which the CLI writes to its session; the orchestrator dies
// (SIGKILL) before it reads the turn's end. (It is stopped as the request
// reaches the model, so that it reads nothing more, and killed once the
// question is in the session.) `resume` finds the question at the end of
// the session and puts it to a person (the terminal) instead of telling
// the model to continue; the answer then reaches the model once.
func TestKilledBetweenTheQuestionAndItsReading(t *testing.T) {
	clitest.Claude(t)
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	home := strings.Trim(strings.TrimSpace(strings.TrimPrefix(homeLine.FindString(e.base), "    HOME:")), `"`)
	cmd := e.child("", "", "run", "--prompt", "Implement spec X")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := e.fake.WaitRequests(ctx, 1); err != nil {
		cmd.Process.Kill()
		t.Fatalf("the prompt never reached the model: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the question in the CLI's session", func() bool {
		files, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", "*.jsonl"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, `"type":"assistant"`) && strings.Contains(line, "QUESTION") {
					return true
				}
			}
		}
		return false
	})
	cmd.Process.Signal(syscall.SIGKILL)
	wantKilled(t, cmd.Wait())
	run := e.onlyRun()
	if sets, _ := e.store().QuestionSets(context.Background(), store.SetFilter{RunID: run.ID}); len(sets) != 0 {
		t.Fatalf("the killed process stored %d question sets, want none (it never read the turn's end)", len(sets))
	}
	res := e.child("2\n", "", "resume", run.ID)
	out := res.Stdout.(*lockedBuffer)
	if err := res.Run(); err != nil {
		t.Fatalf("resume: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "Which auth method?") {
		t.Errorf("resume did not put the question to the person:\n%s", out.String())
	}
	for _, r := range e.fake.Requests() {
		if strings.Contains(r.LastUserText, "from where you left off") {
			t.Errorf("the model was told to continue instead of being answered: %q", r.LastUserText)
		}
	}
	e.wantDoneOnce(t, "Implemented with JWT.")
	sets, _ := e.store().QuestionSets(context.Background(), store.SetFilter{RunID: run.ID})
	if len(sets) != 1 || sets[0].Response.Surface != "terminal" {
		t.Fatalf("sets %+v, want one answered on the terminal", sets)
	}
}
