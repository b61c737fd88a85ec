package runner_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
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
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// fakeDelivery records how the loop uses a run's delivery.
type fakeDelivery struct {
	dir        string
	workdirErr error
	deliverErr error
	onDeliver  func(run store.Run) // called by Deliver, if set
	// prURL, when set, is saved as the run's pull request (in store) by
	// Deliver, as internal/delivery does once it opened one.
	prURL string
	store *store.Store

	mu       sync.Mutex
	workdirs int
	delivers []store.RunStatus // the run's status when Deliver was called
	finished []store.RunStatus
}

func (d *fakeDelivery) Workdir(ctx context.Context, run store.Run) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.workdirs++
	return d.dir, d.workdirErr
}

func (d *fakeDelivery) Deliver(ctx context.Context, run store.Run, failpoint func(string)) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.delivers = append(d.delivers, run.Status)
	if d.onDeliver != nil {
		d.onDeliver(run)
	}
	if d.prURL != "" {
		dl := store.Delivery{RunID: run.ID, Worktree: d.dir, Branch: "orchestrator/" + run.ID, State: store.DeliveryOpened, PRNumber: 1, PRURL: d.prURL}
		if err := d.store.SaveDelivery(ctx, dl); err != nil {
			return "", err
		}
	}
	return "pull request https://example.invalid/pull/1", d.deliverErr
}

func (d *fakeDelivery) Finish(ctx context.Context, run store.Run) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.finished = append(d.finished, run.Status)
	return nil
}

func driveDelivered(t *testing.T, d *fakeDelivery) (store.Run, *store.Store, []runner.Event) {
	t.Helper()
	run, st, events, _, err := driveDeliveredErr(t, d)
	if err != nil {
		t.Fatal(err)
	}
	return run, st, events
}

// driveDeliveredErr is driveDelivered returning Drive's error, and the
// runner.
func driveDeliveredErr(t *testing.T, d *fakeDelivery, surfs ...surfaces.Surface) (store.Run, *store.Store, []runner.Event, *runner.Runner, error) {
	t.Helper()
	claude := clitest.Claude(t)
	f := fakeapi.New(
		fakeapi.Rule{When: "Say where you are", Reply: fakeapi.Reply{Text: "Looking.", ToolUse: &fakeapi.ToolUse{Name: "Bash",
			Input: map[string]any{"command": "pwd > where.txt && echo wrote-where"}}}},
		fakeapi.Rule{When: "wrote-where", Reply: fakeapi.Reply{Text: "Done."}},
	)
	ts := httptest.NewServer(f)
	t.Cleanup(func() { f.Close(); ts.Close() })
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	d.store = st
	ex, err := executor.New(executor.Config{Command: claude, Env: clitest.Env(t, ts.URL), AllowedTools: []string{"Bash"},
		AppendSystemPrompt: questions.ProtocolPrompt(), Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []runner.Event
	r, err := runner.New(runner.Config{
		Store:    st,
		Resolve:  func(store.Run) (runner.Resolved, error) { return runner.Resolved{Agent: ex, Surfaces: surfs}, nil },
		Delivery: func(store.Run) (runner.Delivery, error) { return d, nil },
		Observe:  func(ev runner.Event) { mu.Lock(); events = append(events, ev); mu.Unlock() },
		Logger:   slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := r.Create(ctx, runner.NewRun{Prompt: "Say where you are", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	run, err = r.Drive(ctx, run.ID)
	mu.Lock()
	defer mu.Unlock()
	return run, st, events, r, err
}

// TestDeliveryWorktreeIsWhereTurnsRun: the turns run in the delivery's
// directory, and the work is delivered before the run is done, then the
// run's delivery is finished.
func TestDeliveryWorktreeIsWhereTurnsRun(t *testing.T) {
	t.Parallel()
	d := &fakeDelivery{dir: t.TempDir()}
	run, _, events := driveDelivered(t, d)
	if run.Status != store.RunDone {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}
	where, err := os.ReadFile(filepath.Join(d.dir, "where.txt"))
	if err != nil {
		t.Fatalf("the turn did not run in the delivery's directory: %v", err)
	}
	if got, _ := filepath.EvalSymlinks(strings.TrimSpace(string(where))); got != mustEval(t, d.dir) {
		t.Fatalf("pwd = %s, want %s", where, d.dir)
	}
	if len(d.delivers) != 1 || d.delivers[0].Final() || len(d.finished) != 1 || d.finished[0] != store.RunDone {
		t.Fatalf("delivers %v, finished %v", d.delivers, d.finished)
	}
	var delivered, done int
	for i, ev := range events {
		switch ev.Kind {
		case runner.EventDelivered:
			delivered = i
		case runner.EventDone:
			done = i
		}
	}
	if delivered == 0 || done < delivered {
		t.Fatalf("the delivered event (%d) must come before done (%d)", delivered, done)
	}
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	e, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestDeliveryErrorFailsTheRun: a delivery that fails makes the run fail
// with its reason; nothing is finished (the worktree stays).
func TestDeliveryErrorFailsTheRun(t *testing.T) {
	t.Parallel()
	d := &fakeDelivery{dir: t.TempDir(), deliverErr: errors.New("push rejected: not a fast-forward")}
	run, _, _ := driveDelivered(t, d)
	if run.Status != store.RunFailed || run.Error != "deliver: push rejected: not a fast-forward" {
		t.Fatalf("run = %s %q", run.Status, run.Error)
	}
	if len(d.finished) != 0 {
		t.Fatalf("finished %v after a failed delivery", d.finished)
	}
}

// TestDeliveryWorkdirErrorFailsBeforeAnyTurn: no worktree, no turn.
func TestDeliveryWorkdirErrorFailsBeforeAnyTurn(t *testing.T) {
	t.Parallel()
	d := &fakeDelivery{workdirErr: errors.New("workdir /x: not a git repository")}
	run, st, _ := driveDelivered(t, d)
	if run.Status != store.RunFailed || !strings.Contains(run.Error, "not a git repository") {
		t.Fatalf("run = %s %q", run.Status, run.Error)
	}
	if turns, _ := st.Turns(context.Background(), run.ID); len(turns) != 0 {
		t.Fatalf("%d turns started without a worktree", len(turns))
	}
}

// TestDeliveryWorkElsewhereLeavesTheRun: the run's work is on another
// instance (store.ErrWorkElsewhere: a parked commit its push did not bring
// to the remote): no turn runs here and the run is not failed.
func TestDeliveryWorkElsewhereLeavesTheRun(t *testing.T) {
	t.Parallel()
	d := &fakeDelivery{workdirErr: fmt.Errorf("run x: its work in progress is not on origin: %w", store.ErrWorkElsewhere)}
	run, st, _, _, err := driveDeliveredErr(t, d)
	if !errors.Is(err, store.ErrWorkElsewhere) {
		t.Fatalf("Drive: %v, want the work elsewhere", err)
	}
	run, _ = st.Run(context.Background(), run.ID)
	if run.Status.Final() {
		t.Fatalf("run %s %q, want it left for the instance that has its work", run.Status, run.Error)
	}
	if turns, _ := st.Turns(context.Background(), run.ID); len(turns) != 0 {
		t.Fatalf("%d turns started without the run's work", len(turns))
	}
}

// TestRedeliver: a done run whose delivery is pending is delivered again
// (and finished once no longer pending); one with nothing pending says so.
func TestRedeliver(t *testing.T) {
	t.Parallel()
	d := &fakeDelivery{dir: t.TempDir()}
	run, st, _, r, err := driveDeliveredErr(t, d)
	if err != nil || run.Status != store.RunDone {
		t.Fatalf("drive: %s, %v", run.Status, err)
	}
	ctx := context.Background()
	if _, err := r.Redeliver(ctx, run.ID); !errors.Is(err, runner.ErrNothingPending) {
		t.Fatalf("Redeliver with no delivery pending: %v", err)
	}
	dl := store.Delivery{RunID: run.ID, Worktree: d.dir, Branch: "b", State: store.DeliveryPushed, Pending: true, Attempts: 1, LastError: "502"}
	if err := st.SaveDelivery(ctx, dl); err != nil {
		t.Fatal(err)
	}
	d.onDeliver = func(store.Run) {
		dl.Pending, dl.State = false, store.DeliveryOpened
		if err := st.SaveDelivery(ctx, dl); err != nil {
			t.Error(err)
		}
	}
	line, err := r.Redeliver(ctx, run.ID)
	if err != nil || !strings.Contains(line, "pull request") {
		t.Fatalf("Redeliver = %q, %v", line, err)
	}
	if len(d.delivers) != 2 || len(d.finished) != 2 {
		t.Fatalf("delivers %v, finished %v; want one more of each", d.delivers, d.finished)
	}
	if _, err := r.Redeliver(ctx, run.ID); !errors.Is(err, runner.ErrNothingPending) {
		t.Fatalf("Redeliver once delivered: %v", err)
	}
}

// ender is a surface that shows a run's progress and its end.
type ender struct {
	*tidy
	pmu   sync.Mutex
	final []surfaces.RunProgress
}

func (e *ender) Progress(ctx context.Context, p surfaces.RunProgress) error {
	if p.Final {
		e.pmu.Lock()
		e.final = append(e.final, p)
		e.pmu.Unlock()
	}
	return nil
}

// TestRunEndCarriesPullRequest: a run delivered through a pull request
// tells its surfaces the pull request's page, in the final progress and in
// the run's end.
func TestRunEndCarriesPullRequest(t *testing.T) {
	t.Parallel()
	const pr = "https://github.com/acme/app/pull/1"
	e := &ender{tidy: &tidy{person: newPerson("test")}}
	d := &fakeDelivery{dir: t.TempDir(), prURL: pr}
	run, _, _, _, err := driveDeliveredErr(t, d, e)
	if err != nil || run.Status != store.RunDone {
		t.Fatalf("run = %s %q, %v; want done", run.Status, run.Error, err)
	}
	_, ended := e.calls()
	if len(ended) != 1 || ended[0].PRURL != pr || ended[0].Step != "done" {
		t.Errorf("ended = %+v, want the run ended once, done, with PRURL %s", ended, pr)
	}
	e.pmu.Lock()
	defer e.pmu.Unlock()
	if len(e.final) != 1 || e.final[0].PRURL != pr {
		t.Errorf("final progress = %+v, want one with PRURL %s", e.final, pr)
	}
}
