package runner_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// watcher is a surface that asks without a goroutine per set
// (surfaces.Watcher), as serve's GitHub and Discord surfaces do: the test
// answers through the Answers a set was watched with.
type watcher struct {
	name    string
	mu      sync.Mutex
	watched map[string]surfaces.Answers
	watches []string
	unwatch []string
	resolve []string
	remind  int
	fail    int // the next Watches that fail
	changed chan struct{}
}

func newWatcher(name string) *watcher {
	return &watcher{name: name, watched: map[string]surfaces.Answers{}, changed: make(chan struct{}, 1)}
}

func (w *watcher) Name() string { return w.name }

func (w *watcher) Ask(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	return errors.New("a watcher is never asked with Ask under serve")
}

func (w *watcher) Watch(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	w.mu.Lock()
	defer w.poke()
	defer w.mu.Unlock()
	w.watches = append(w.watches, set.ID)
	if w.fail > 0 {
		w.fail--
		return errors.New("502 Bad Gateway")
	}
	w.watched[set.ID] = answers
	return nil
}

func (w *watcher) Unwatch(setID string) {
	w.mu.Lock()
	defer w.poke()
	defer w.mu.Unlock()
	w.unwatch = append(w.unwatch, setID)
	delete(w.watched, setID)
}

func (w *watcher) Resolve(ctx context.Context, set questions.Set, resp questions.Response) error {
	w.mu.Lock()
	defer w.poke()
	defer w.mu.Unlock()
	w.resolve = append(w.resolve, set.ID)
	return nil
}

func (w *watcher) Remind(ctx context.Context, set questions.Set) error {
	w.mu.Lock()
	defer w.poke()
	defer w.mu.Unlock()
	w.remind++
	return nil
}

func (w *watcher) poke() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// until waits for cond, looked at whenever the surface is called and
// every 50ms.
func (w *watcher) until(t *testing.T, what string, cond func(w *watcher) bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		w.mu.Lock()
		ok := cond(w)
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-w.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s: %s never happened", w.name, what)
		}
	}
}

// answer answers every question of a watched set with its first option.
func (w *watcher) answer(t *testing.T, set questions.Set) {
	t.Helper()
	w.mu.Lock()
	answers := w.watched[set.ID]
	w.mu.Unlock()
	if answers == nil {
		t.Fatalf("%s does not watch %s", w.name, set.ID)
	}
	resp := questions.Response{SetID: set.ID, By: "alice", Surface: w.name, At: time.Now()}
	for _, q := range set.Questions {
		resp.Answers = append(resp.Answers, questions.Answer{QuestionID: q.ID, Labels: []string{q.Options[0].Label}})
	}
	d, err := answers.Offer(context.Background(), resp)
	if err != nil || !d.Taken {
		t.Fatalf("offer = %+v, %v", d, err)
	}
}

var _ surfaces.Watcher = (*watcher)(nil)

// room is a runner of parked runs with its ask room running.
func startRoom(t *testing.T, st *store.Store, surfs []surfaces.Surface, pol runner.Policy) *runner.Runner {
	t.Helper()
	r, err := runner.New(runner.Config{
		Store: st,
		Resolve: func(store.Run) (runner.Resolved, error) {
			return runner.Resolved{Surfaces: surfs, Policy: pol}, nil
		},
		Park:   true,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Limits: runner.Limits{AskRetryBackoff: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.AskWaiting(ctx, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("AskWaiting: %v", err)
		}
	})
	return r
}

// seedWaiting stores n runs, each waiting on a set of one question.
func seedWaiting(t *testing.T, st *store.Store, prefix string, n int) []questions.Set {
	t.Helper()
	ctx := context.Background()
	var out []questions.Set
	for i := range n {
		id := fmt.Sprintf("%s%04d", prefix, i)
		if _, err := st.CreateRun(ctx, store.Run{ID: id, Prompt: "do it", Surfaces: []string{"w"}}); err != nil {
			t.Fatal(err)
		}
		turn, err := st.BeginTurn(ctx, store.Turn{RunID: id, Kind: store.TurnStart, Prompt: "do it", SessionID: "sess-" + id})
		if err != nil {
			t.Fatal(err)
		}
		set := questions.Set{ID: id + "-s1", RunID: id, Turn: turn.Seq, Questions: []questions.Question{
			{ID: "q1", Text: "Which one?", Options: []questions.Option{{Label: "A"}, {Label: "B"}}}}}
		if err := st.FinishTurn(ctx, id, turn.Seq, store.TurnResult{Status: "success", SessionID: "sess-" + id}, &set, []string{"w"}); err != nil {
			t.Fatal(err)
		}
		out = append(out, set)
	}
	return out
}

// TestAskRoomWatchesEveryWaitingSetWithoutAGoroutineEach: 300 waiting runs
// are shown on their surface with no goroutine left per set; an answer
// given on the surface settles its set (the surface lets it go, the other
// surface shows who answered), and a set answered elsewhere is let go by
// both.
func TestAskRoomWatchesEveryWaitingSetWithoutAGoroutineEach(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const n = 300
	sets := seedWaiting(t, st, "w", n)
	before := runtime.NumGoroutine()
	a, b := newWatcher("a"), newWatcher("b")
	startRoom(t, st, []surfaces.Surface{a, b}, runner.Policy{})
	a.until(t, "every set watched", func(w *watcher) bool { return len(w.watched) == n })
	b.until(t, "every set watched", func(w *watcher) bool { return len(w.watched) == n })
	// Settled: the room's loop and its change watcher are all it holds.
	var grown int
	for range 100 {
		if grown = runtime.NumGoroutine() - before; grown <= 10 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if grown > 10 {
		t.Fatalf("%d goroutines more with %d sets watched; the room must not hold one per set", grown, n)
	}

	a.answer(t, sets[7])
	a.until(t, "the answered set let go", func(w *watcher) bool { return slices.Contains(w.unwatch, sets[7].ID) })
	b.until(t, "the answer shown", func(w *watcher) bool {
		return slices.Contains(w.unwatch, sets[7].ID) && slices.Contains(w.resolve, sets[7].ID)
	})
	if slices.Contains(a.resolve, sets[7].ID) {
		t.Error("the surface that took the answer was asked to show it again")
	}

	// Answered by another process (`orchestrator answer`).
	resp := questions.Response{SetID: sets[9].ID, By: "bob", Surface: "cli", At: time.Now(),
		Answers: []questions.Answer{{QuestionID: "q1", Labels: []string{"B"}}}}
	if _, err := st.Offer(context.Background(), resp); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*watcher{a, b} {
		w.until(t, "the set answered elsewhere let go and shown", func(w *watcher) bool {
			return slices.Contains(w.unwatch, sets[9].ID) && slices.Contains(w.resolve, sets[9].ID)
		})
	}
	// A cancelled run's set is let go too.
	if err := st.CancelRun(context.Background(), sets[11].RunID, "cancelled by carol"); err != nil {
		t.Fatal(err)
	}
	a.until(t, "the cancelled run's set let go", func(w *watcher) bool { return slices.Contains(w.unwatch, sets[11].ID) })
	a.until(t, fmt.Sprintf("%d sets watched", n-3), func(w *watcher) bool { return len(w.watched) == n-3 })
}

// TestAskRoomRetriesAFailedWatchAndLeavesDrivenRunsAlone: a surface that
// fails to show a set is asked again after a backoff; a run a foreground
// process drives is left to it, and asked once that process let go.
func TestAskRoomRetriesAFailedWatchAndLeavesDrivenRunsAlone(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sets := seedWaiting(t, st, "r", 2)
	lock, err := st.LockRun(sets[1].RunID) // `orchestrator run` waits at its terminal
	if err != nil {
		t.Fatal(err)
	}
	w := newWatcher("w")
	w.fail = 2
	startRoom(t, st, []surfaces.Surface{w}, runner.Policy{})
	w.until(t, "the set shown after two failures", func(w *watcher) bool {
		return w.watched[sets[0].ID] != nil && slices.Index(w.watches, sets[0].ID) >= 0
	})
	w.mu.Lock()
	tries, driven := 0, w.watched[sets[1].ID] != nil
	for _, id := range w.watches {
		if id == sets[0].ID {
			tries++
		}
	}
	w.mu.Unlock()
	if tries < 2 || driven {
		t.Fatalf("set shown after %d tries (want ≥ 2); driven run's set watched: %v", tries, driven)
	}
	lock.Unlock()
	w.until(t, "the run let go by its process asked", func(w *watcher) bool { return w.watched[sets[1].ID] != nil })
}

// TestAskRoomReminderEscalationTimeout: a parked run's set is reminded,
// escalated to a second surface (which is shown it), and a second set
// times out with on_timeout decide: its answer is stored by the room.
func TestAskRoomReminderEscalationTimeout(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sets := seedWaiting(t, st, "p", 1)
	slow, boss := newWatcher("slow"), newWatcher("boss")
	startRoom(t, st, []surfaces.Surface{slow}, runner.Policy{RemindEvery: 300 * time.Millisecond, EscalateTo: boss})
	slow.until(t, "a reminder", func(w *watcher) bool { return w.remind >= 1 })
	boss.until(t, "the escalation shown", func(w *watcher) bool { return w.watched[sets[0].ID] != nil })
	boss.answer(t, sets[0])
	slow.until(t, "the answer shown after the escalation", func(w *watcher) bool { return slices.Contains(w.resolve, sets[0].ID) })
	rec, err := st.QuestionSet(context.Background(), sets[0].ID)
	if err != nil || rec.State != store.SetAnswered || rec.RemindedAt.IsZero() || rec.EscalatedAt.IsZero() || rec.Response.Surface != "boss" {
		t.Fatalf("set = %+v, %v", rec, err)
	}

	st2, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	sets = seedWaiting(t, st2, "t", 1)
	w := newWatcher("w")
	startRoom(t, st2, []surfaces.Surface{w}, runner.Policy{QuestionTimeout: 300 * time.Millisecond, OnTimeout: runner.OnTimeout{Action: "decide"}})
	deadline := time.Now().Add(time.Minute)
	for {
		rec, err := st2.QuestionSet(context.Background(), sets[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State == store.SetAnswered {
			if rec.Response.Surface != "timeout" {
				t.Fatalf("answered by %q, want the timeout", rec.Response.Surface)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the set never timed out")
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.until(t, "the timed-out set let go", func(w *watcher) bool { return slices.Contains(w.unwatch, sets[0].ID) })
}
