package runner_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// requireClaude returns the real CLI's path. This test is the proof that
// runs move between machines, so it fails rather than skips without the
// CLI.
func requireClaude(t *testing.T) string {
	t.Helper()
	if os.Getenv(clitest.EnvVar) == "" {
		t.Fatalf("%s is not set: this test needs the real Claude Code CLI; `make claude` installs it (`make test` installs it and sets %s)",
			clitest.EnvVar, clitest.EnvVar)
	}
	return clitest.Claude(t)
}

// TestE2ESessionResumesOnAnotherMachine: with the REAL CLI, a run asks its
// question on machine A (its own HOME) and stops there; the answer is
// recorded in the store; machine B, with an empty HOME (another machine,
// the run's working directory at the same path), resumes it. B's CLI finds
// the session the runner wrote back from the store, so the model continues
// the conversation it had on A and gets the answer once. The same resume
// on B without the session written back fails: CategorySessionNotFound,
// and nothing reaches the model.
func TestE2ESessionResumesOnAnotherMachine(t *testing.T) {
	claude := requireClaude(t)
	f := fakeapi.New(rules()...)
	ts := httptest.NewServer(f)
	t.Cleanup(func() { f.Close(); ts.Close() })
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	newExecutor := func() (*executor.Executor, string) {
		env := clitest.Env(t, ts.URL) // a HOME of its own: a machine
		ex, err := executor.New(executor.Config{Command: claude, Env: env, AppendSystemPrompt: questions.ProtocolPrompt(), Timeout: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return ex, env["HOME"]
	}
	a, homeA := newExecutor()
	b, homeB := newExecutor()
	if homeA == homeB {
		t.Fatal("the two machines share a HOME")
	}

	var mu sync.Mutex
	var agent runner.Agent
	var stop context.CancelFunc
	r, err := runner.New(runner.Config{
		Store: st,
		Resolve: func(store.Run) (runner.Resolved, error) {
			mu.Lock()
			defer mu.Unlock()
			return runner.Resolved{Agent: agent}, nil
		},
		Observe: func(ev runner.Event) {
			if ev.Kind == runner.EventQuestion {
				mu.Lock()
				stop() // the machine stops while the question waits
				mu.Unlock()
			}
		},
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	drive := func(on runner.Agent, runID string) store.Run {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		mu.Lock()
		agent, stop = on, cancel
		mu.Unlock()
		run, err := r.Drive(ctx, runID)
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("drive: %v", err)
		}
		return run
	}
	wd := t.TempDir()
	// askOnA runs the first turn on A and answers its question in the
	// store, as `orchestrator answer` on any machine would.
	askOnA := func() store.Run {
		t.Helper()
		ctx := context.Background()
		run, err := r.Create(ctx, runner.NewRun{Prompt: "Implement spec X", WorkDir: wd})
		if err != nil {
			t.Fatal(err)
		}
		if got := drive(a, run.ID); got.Status != store.RunWaiting {
			t.Fatalf("after the first turn on A: %s %q", got.Status, got.Error)
		}
		sets, err := st.QuestionSets(ctx, store.SetFilter{RunID: run.ID})
		if err != nil || len(sets) != 1 {
			t.Fatalf("question sets: %v, %v", sets, err)
		}
		set := sets[0].Set
		if _, err := st.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "alice", Surface: "cli", At: time.Now(),
			Answers: []questions.Answer{{QuestionID: set.Questions[0].ID, Labels: []string{"OAuth2"}}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.ReadSession(wd, run.SessionID); !errors.Is(err, executor.ErrSessionFileNotFound) {
			t.Fatalf("B has the session before the resume: %v", err)
		}
		return run
	}

	run := askOnA()
	before := len(f.Requests())
	got := drive(b, run.ID)
	if got.Status != store.RunDone || got.FinalText != "Implemented with OAuth2." {
		t.Fatalf("resumed on B: %s %q %q", got.Status, got.FinalText, got.Error)
	}
	reqs := f.Requests()[before:]
	if len(reqs) != 1 || !strings.Contains(reqs[0].LastUserText, "BEGIN ANSWERS") {
		t.Fatalf("%d requests on B; want one, with the answer", len(reqs))
	}
	carried, answers := false, 0
	for _, m := range reqs[0].Messages {
		if m.Role == "assistant" && strings.Contains(m.Text(), "I need a decision.") {
			carried = true
		}
		if m.Role == "user" && strings.Contains(m.Text(), "BEGIN ANSWERS") {
			answers++
		}
	}
	if !carried || answers != 1 {
		t.Fatalf("B's request: A's conversation carried %v, the answer %d times; want true, 1", carried, answers)
	}

	// Without the session written back, B's CLI has none to resume.
	run = askOnA()
	before = len(f.Requests())
	got = drive(onlyAgent{b}, run.ID)
	last, _, err := st.LastTurn(context.Background(), run.ID)
	if err != nil || got.Status != store.RunFailed || last.Result.Category != executor.CategorySessionNotFound {
		t.Fatalf("resumed on B without the session: %s %q, last turn %q, %v", got.Status, got.Error, last.Result.Category, err)
	}
	if n := len(f.Requests()) - before; n != 0 {
		t.Fatalf("%d requests reached the model from a resume without a session", n)
	}
}
