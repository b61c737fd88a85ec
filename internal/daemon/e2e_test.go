package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/specs"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// cliEnv is the real CLI against a fake API, and a store.
type cliEnv struct {
	api    *fakeapi.Server
	ex     *executor.Executor
	wd     string
	st     *store.Store
	m      *Metrics
	logs   *logRecorder
	events chan runner.Event
}

func newCLIEnv(t *testing.T, rules ...fakeapi.Rule) *cliEnv {
	t.Helper()
	claude := clitest.Claude(t)
	api := fakeapi.New(rules...)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	env := clitest.Env(t, srv.URL)
	wd := filepath.Join(env["HOME"], "project")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	var base []string
	for _, k := range []string{"PATH", "TMPDIR", "LANG", "LC_ALL", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			base = append(base, k+"="+v)
		}
	}
	ex, err := executor.New(executor.Config{Command: claude, Env: env, BaseEnv: base, KillGrace: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t, t.TempDir())
	return &cliEnv{api: api, ex: ex, wd: wd, st: st, m: NewMetrics(st), logs: newLogRecorder(), events: make(chan runner.Event, 1000)}
}

// runner is a new runner (as a new process would make) on the store, with
// no surface: only the store (another process's `orchestrator answer`)
// answers.
func (e *cliEnv) runner(t *testing.T) *runner.Runner {
	t.Helper()
	r, err := runner.New(runner.Config{
		Store:   e.st,
		Resolve: func(store.Run) (runner.Resolved, error) { return runner.Resolved{Agent: e.ex}, nil },
		Observe: func(ev runner.Event) {
			e.m.Observe(ev)
			switch ev.Kind {
			case runner.EventQuestion, runner.EventRunEnded, runner.EventTurnStarted:
				e.events <- ev
			}
		},
		Logger: slog.New(e.logs),
		// serve's runner: a waiting run is parked, and the daemon's ask
		// room asks it.
		Park:        true,
		KeepWaiting: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// next returns the next event of the kind (and of the run, when given).
func (e *cliEnv) next(t *testing.T, kind runner.EventKind, runID string) runner.Event {
	t.Helper()
	for {
		select {
		case ev := <-e.events:
			if ev.Kind == kind && (runID == "" || ev.RunID == runID) {
				return ev
			}
		case <-time.After(3 * time.Minute):
			t.Fatalf("no %s event; the log:\n%s", kind, e.logs.dump())
		}
	}
}

func (e *cliEnv) answer(t *testing.T, set *questions.Set, label string) {
	t.Helper()
	q := set.Questions[0]
	if _, err := e.st.RecordAnswer(context.Background(), questions.Response{SetID: set.ID, By: "tester", Surface: "cli", At: time.Now(),
		Answers: []questions.Answer{{QuestionID: q.ID, Labels: []string{label}}}}); err != nil {
		t.Fatal(err)
	}
}

// TestRealRunnerScheduledSpec runs a spec every second with the real runner
// and the real CLI against the fake API's rehearsal script (a question, then
// done): while the first run waits on its question the ticks are skipped
// and no other session starts; the answer (stored as `orchestrator answer`
// would) finishes the run; the next tick starts a new run.
func TestRealRunnerScheduledSpec(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t, fakeapi.Rehearsal()...)
	d, err := New(Config{
		Specs: []specs.Spec{{Name: "rehearse", Schedule: "@every 1s", Body: "Add a login page."}},
		Runs:  e.runner(t),
		Store: e.st,
		NewRun: func(sp specs.Spec, _ []byte) (runner.NewRun, error) {
			return runner.NewRun{Prompt: sp.Body, WorkDir: e.wd}, nil
		},
		Listen: "127.0.0.1:0", Metrics: e.m, Logger: slog.New(e.logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, d)

	q1 := e.next(t, runner.EventQuestion, "")
	e.logs.waitFor(t, "run skipped: ", 2) // the first run drives, then waits parked
	runs, err := e.st.ListRuns(context.Background(), store.RunFilter{Spec: "rehearse"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != store.RunWaiting {
		t.Fatalf("runs while the first one waits: %+v", runs)
	}
	if n := len(e.api.Requests()); n != 1 {
		t.Fatalf("%d API requests while the first run waits, want 1", n)
	}

	e.answer(t, q1.Set, "Signed JWT")
	end := e.next(t, runner.EventRunEnded, q1.RunID)
	if end.Run.Status != store.RunDone || end.Run.FinalText != "Done. Implemented using Signed JWT." {
		t.Fatalf("first run ended as %+v", end.Run)
	}
	q2 := e.next(t, runner.EventQuestion, "")
	if q2.RunID == q1.RunID {
		t.Fatal("the next tick did not start a new run")
	}

	fams := scrape(t, d)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"orchestrator_runs_total", []string{"outcome", "done"}, 1},
		{"orchestrator_questions_pending", nil, 1},
		{"orchestrator_questions_asked_total", nil, 2},
		{"orchestrator_answers_total", []string{"surface", "cli"}, 1},
		{"orchestrator_answer_latency_seconds", []string{"surface", "cli"}, 1},
		{"orchestrator_agent_turns_total", nil, 3},
		{"orchestrator_runs_in_progress", nil, 0}, // the second run waits parked
	} {
		if got := value(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	if err := s.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	run2, err := e.st.Run(context.Background(), q2.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run2.Status != store.RunWaiting {
		t.Fatalf("the second run is %s after shutdown, want waiting", run2.Status)
	}
}

// TestRealRunnerRestart stops the daemon while one run waits on a question
// and another's turn is running, starts a new daemon (and runner) on the
// same state, and checks that both runs finish, each with exactly one more
// CLI turn.
func TestRealRunnerRestart(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t,
		fakeapi.Rule{When: "was stopped before your last turn finished", Reply: fakeapi.Reply{Text: "Done after the restart."}},
		fakeapi.Rule{When: "Slow task", Reply: fakeapi.Reply{Text: "Counting slowly: one two three four five six seven eight nine ten.", Chunks: 40, ChunkDelay: 500 * time.Millisecond}},
		fakeapi.Rule{Respond: fakeapi.Rehearsal()[0].Respond},
	)
	ctx := context.Background()
	r1 := e.runner(t)
	ask, err := r1.Create(ctx, runner.NewRun{Prompt: "Add a login page.", WorkDir: e.wd})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := r1.Create(ctx, runner.NewRun{Prompt: "Slow task: count to ten.", WorkDir: e.wd})
	if err != nil {
		t.Fatal(err)
	}

	// The first daemon takes both up (created, never driven: as left by a
	// process that died), and is stopped while the slow turn streams.
	d1, err := New(Config{Runs: r1, Store: e.st, Logger: slog.New(e.logs)})
	if err != nil {
		t.Fatal(err)
	}
	s1 := start(t, d1)
	q := e.next(t, runner.EventQuestion, ask.ID)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if _, err := e.api.WaitRequests(wctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := s1.stop(t); err != nil {
		t.Fatalf("first daemon: %v", err)
	}
	before := map[string]int{}
	for _, c := range []struct {
		id   string
		want store.RunStatus
	}{{ask.ID, store.RunWaiting}, {slow.ID, store.RunInterrupted}} {
		run, err := e.st.Run(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != c.want {
			t.Fatalf("run %s (%s) is %s after the shutdown, want %s", c.id, run.Prompt, run.Status, c.want)
		}
		turns, err := e.st.Turns(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		before[c.id] = len(turns)
	}

	// The answer comes while no daemon runs; a new daemon takes both up.
	for drained := false; !drained; {
		select {
		case <-e.events: // the first daemon's
		default:
			drained = true
		}
	}
	e.answer(t, q.Set, "GitHub OAuth")
	d2, err := New(Config{Runs: e.runner(t), Store: e.st, Logger: slog.New(e.logs)})
	if err != nil {
		t.Fatal(err)
	}
	s2 := start(t, d2)
	ended := map[string]*store.Run{}
	for len(ended) < 2 {
		ev := e.next(t, runner.EventRunEnded, "")
		ended[ev.RunID] = ev.Run
	}
	if err := s2.stop(t); err != nil {
		t.Fatalf("second daemon: %v", err)
	}
	for id, want := range map[string]string{ask.ID: "Done. Implemented using GitHub OAuth.", slow.ID: "Done after the restart."} {
		run := ended[id]
		if run == nil || run.Status != store.RunDone {
			if turns, err := e.st.Turns(ctx, id); err == nil && len(turns) > 0 {
				b, _ := os.ReadFile(turns[0].TranscriptPath)
				t.Logf("turn 1 transcript:\n%s", b)
			}
			t.Fatalf("run %s ended as %+v", id, run)
		}
		turns, err := e.st.Turns(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var resumed int
		for _, tr := range turns[before[id]:] {
			if tr.Resume {
				resumed++
			}
		}
		if len(turns) != before[id]+1 || resumed != 1 {
			t.Errorf("run %s: %d turns before the restart, %d after (%d resumed); want exactly one resumed turn", id, before[id], len(turns), resumed)
		}
		if run.FinalText != want {
			t.Errorf("run %s final text %q, want %q", id, run.FinalText, want)
		}
	}
}

// gone is a surface whose input has ended (a terminal at EOF).
type gone struct{}

func (gone) Name() string { return "terminal" }
func (gone) Ask(_ context.Context, set questions.Set, _ surfaces.Answers) error {
	return fmt.Errorf("ask %s: input closed: %w", set.ID, surfaces.ErrUnavailable)
}

// TestAnswerResumesARunLeftWaitingWhileServing: a foreground `run` exits
// with its question waiting (its terminal's input ended) while a daemon
// serves; the daemon's ask room asks it once no process drives it, and the
// answer given then with `orchestrator answer` resumes it.
func TestAnswerResumesARunLeftWaitingWhileServing(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t, fakeapi.Rehearsal()...)
	d, err := New(Config{Runs: e.runner(t), Store: e.st, Logger: slog.New(e.logs), AdoptEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, d)
	fg, err := runner.New(runner.Config{Store: e.st, Resolve: func(store.Run) (runner.Resolved, error) {
		return runner.Resolved{Agent: e.ex, Surfaces: []surfaces.Surface{gone{}}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run, err := fg.Create(ctx, runner.NewRun{Prompt: "Add a login page.", WorkDir: e.wd})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := fg.Drive(ctx, run.ID); !errors.Is(err, runner.ErrWaiting) || got.Status != store.RunWaiting {
		t.Fatalf("foreground drive = %s, %v; want waiting", got.Status, err)
	}
	q := e.next(t, runner.EventQuestion, run.ID) // the daemon's ask room asks it
	e.answer(t, q.Set, "GitHub OAuth")
	end := e.next(t, runner.EventRunEnded, run.ID)
	if end.Run.Status != store.RunDone || end.Run.FinalText != "Done. Implemented using GitHub OAuth." {
		t.Fatalf("run ended as %+v", end.Run)
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
