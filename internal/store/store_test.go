package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// open opens the store of a test directory: SQLite's, or under TestPostgres
// the directory's schema of the test database (pg_test.go).
func open(t *testing.T, dir string) *Store {
	t.Helper()
	var u string
	if onPostgres(t) {
		u = pgURL(t, dir)
	}
	s, err := OpenDatabase(context.Background(), dir, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func testSet(runID string, turn int, qids ...string) questions.Set {
	set := questions.Set{ID: runID + "-s" + string(rune('0'+turn)), RunID: runID, Turn: turn}
	for _, id := range qids {
		set.Questions = append(set.Questions, questions.Question{ID: id, Text: "Which " + id + "?",
			Options: []questions.Option{{Label: "A"}, {Label: "B"}}})
	}
	return set
}

// newWaitingRun makes a run whose first turn asked set.
func newWaitingRun(t *testing.T, s *Store, runID string, qids ...string) questions.Set {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CreateRun(ctx, Run{ID: runID, Prompt: "do it", Surfaces: []string{"terminal"}}); err != nil {
		t.Fatal(err)
	}
	turn, err := s.BeginTurn(ctx, Turn{RunID: runID, Kind: TurnStart, Prompt: "do it", SessionID: "sess-1"})
	if err != nil {
		t.Fatal(err)
	}
	set := testSet(runID, turn.Seq, qids...)
	if err := s.FinishTurn(ctx, runID, turn.Seq, TurnResult{Status: "success", CostUSD: 0.5, SessionID: "sess-1"}, &set, []string{"terminal"}); err != nil {
		t.Fatal(err)
	}
	return set
}

func TestRunLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	set := newWaitingRun(t, s, "r1", "qa")

	r, err := s.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != RunWaiting || r.SessionID != "sess-1" || r.CostUSD != 0.5 {
		t.Fatalf("run = %+v", r)
	}
	rec, err := s.QuestionSet(ctx, set.ID)
	if err != nil || rec.State != SetPending || len(rec.Set.Questions) != 1 {
		t.Fatalf("set = %+v, %v", rec, err)
	}
	// Claiming a pending set is refused.
	if _, err := s.BeginTurn(ctx, Turn{RunID: "r1", Kind: TurnAnswer, SetID: set.ID}); !errors.Is(err, ErrNotClaimable) {
		t.Fatalf("claim pending: %v", err)
	}
	rec, err = s.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "terminal", Surface: "terminal",
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"B"}}}})
	if err != nil || rec.State != SetAnswered || rec.Response.Answers[0].Labels[0] != "B" {
		t.Fatalf("record answer: %+v, %v", rec, err)
	}
	// Second answer loses, and says who won.
	if _, err := s.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "@x", Surface: "github",
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); !errors.Is(err, ErrAlreadyAnswered) {
		t.Fatalf("second answer: %v", err)
	}
	turn, err := s.BeginTurn(ctx, Turn{RunID: "r1", Kind: TurnAnswer, SetID: set.ID, SessionID: "sess-1", Resume: true, Prompt: "B"})
	if err != nil {
		t.Fatal(err)
	}
	if turn.Seq != 2 {
		t.Fatalf("seq = %d", turn.Seq)
	}
	if _, err := s.BeginTurn(ctx, Turn{RunID: "r1", Kind: TurnAnswer, SetID: set.ID}); !errors.Is(err, ErrNotClaimable) {
		t.Fatalf("second claim: %v", err)
	}
	if err := s.FinishTurn(ctx, "r1", turn.Seq, TurnResult{Status: "success"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	rec, _ = s.QuestionSet(ctx, set.ID)
	if rec.State != SetResumed {
		t.Fatalf("state = %s", rec.State)
	}
	final := "all done"
	if err := s.UpdateRun(ctx, "r1", RunUpdate{Status: RunDone, FinalText: &final}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateRun(ctx, "r1", RunUpdate{Status: RunRunning}); err == nil {
		t.Fatal("a done run was changed")
	}
	turns, err := s.Turns(ctx, "r1")
	if err != nil || len(turns) != 2 || !turns[1].Finished || turns[1].Kind != TurnAnswer {
		t.Fatalf("turns = %+v, %v", turns, err)
	}
}

func TestClaimExactlyOnceUnderContention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	set := newWaitingRun(t, s, "r1", "qa")
	if _, err := s.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "t", Surface: "terminal",
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); err != nil {
		t.Fatal(err)
	}
	// Several "processes" (separate connections pools) race to claim.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		other := open(t, dir)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := other.BeginTurn(ctx, Turn{RunID: "r1", Kind: TurnAnswer, SetID: set.ID})
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, ErrNotClaimable):
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d claims succeeded, want exactly 1", wins.Load())
	}
}

func TestPartialAnswersAndFindQuestion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	set := newWaitingRun(t, s, "r1", "qa", "qb")
	rec, q, err := s.FindQuestion(ctx, "QB")
	if err != nil || q == nil || q.ID != "qb" || rec.Set.ID != set.ID {
		t.Fatalf("find: %+v %+v %v", rec, q, err)
	}
	if _, _, err := s.FindQuestion(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("find unknown: %v", err)
	}
	rec, err = s.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "cli", Surface: "cli",
		Answers: []questions.Answer{{QuestionID: "qb", Text: "free"}}})
	if err != nil || rec.State != SetPending || len(rec.Response.Answers) != 1 {
		t.Fatalf("partial: %+v %v", rec, err)
	}
	rec, err = s.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "@o", Surface: "github",
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}, {QuestionID: "qb", Text: "ignored"}}})
	if err != nil || rec.State != SetAnswered {
		t.Fatalf("complete: %+v %v", rec, err)
	}
	if got := rec.Response; len(got.Answers) != 2 || got.Answers[0].QuestionID != "qa" || got.Answers[1].Text != "free" ||
		got.By != "@o, cli" && got.By != "cli, @o" {
		t.Fatalf("response = %+v", got)
	}
	if _, err := s.RecordAnswer(ctx, questions.Response{SetID: set.ID, Answers: []questions.Answer{{QuestionID: "zz"}}}); err == nil {
		t.Fatal("answer to an unknown question accepted")
	}
	// Two waiting runs with the same short question ID are ambiguous.
	newWaitingRun(t, s, "r2", "qa")
	newWaitingRun(t, s, "r3", "qa")
	if _, _, err := s.FindQuestion(ctx, "qa"); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("ambiguous: %v", err)
	}
}

func TestWaitSetSeesAnotherProcess(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := open(t, dir)
	set := newWaitingRun(t, s, "r1", "qa")
	got := make(chan SetRecord, 1)
	go func() {
		rec, err := s.WaitSet(ctx, set.ID)
		if err != nil {
			t.Error(err)
		}
		got <- rec
	}()
	other := open(t, dir)
	time.Sleep(50 * time.Millisecond) // let the waiter start polling; correctness does not depend on it
	if _, err := other.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "cli", Surface: "cli",
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case rec := <-got:
		if rec.State != SetAnswered {
			t.Fatalf("state = %s", rec.State)
		}
	case <-ctx.Done():
		t.Fatal("waiter never woke")
	}
	// A cancelled wait returns ctx's error.
	set2 := newWaitingRun(t, s, "r2", "qa")
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, err := s.WaitSet(cctx, set2.ID); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

// TestWaitSetWokenByPoke: an answer recorded by another process wakes a
// waiter through the poke, long before its slow poll would look.
func TestWaitSetWokenByPoke(t *testing.T) {
	t.Parallel()
	testWaitAnotherProcess(t, func(s *Store) { s.pollEvery = time.Hour })
}

// TestWaitSetSlowPollWithoutPokes: without pokes (a filesystem without
// change notification), the slow poll still sees another process's answer.
func TestWaitSetSlowPollWithoutPokes(t *testing.T) {
	t.Parallel()
	testWaitAnotherProcess(t, func(s *Store) { s.pollEvery, s.noPokes = 50*time.Millisecond, true })
}

func testWaitAnotherProcess(t *testing.T, tune func(*Store)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := open(t, dir)
	tune(s)
	set := newWaitingRun(t, s, "r1", "qa")
	got := make(chan SetRecord, 1)
	go func() {
		rec, err := s.WaitSet(ctx, set.ID)
		if err != nil {
			t.Error(err)
		}
		got <- rec
	}()
	// Let the waiter start watching; correctness does not depend on it.
	for {
		s.w.mu.Lock()
		running := s.w.running
		s.w.mu.Unlock()
		if running {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	other := open(t, dir)
	if _, err := other.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "cli", Surface: "cli",
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case rec := <-got:
		if rec.State != SetAnswered {
			t.Fatalf("state = %s", rec.State)
		}
	case <-ctx.Done():
		t.Fatal("waiter never woke")
	}
}

// TestWaitSetWokenInProcess: an answer recorded by this process wakes its
// waiters at once, without any poll.
func TestWaitSetWokenInProcess(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := open(t, t.TempDir())
	s.pollEvery, s.noPokes = time.Hour, true
	set := newWaitingRun(t, s, "r1", "qa")
	got := make(chan error, 1)
	go func() { _, err := s.WaitSet(ctx, set.ID); got <- err }()
	time.Sleep(20 * time.Millisecond)
	if _, err := s.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "cli", Surface: "cli",
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// Cancelling the run wakes its waiters too.
	set2 := newWaitingRun(t, s, "r2", "qa")
	go func() { _, err := s.WaitSet(ctx, set2.ID); got <- err }()
	time.Sleep(20 * time.Millisecond)
	if err := s.CancelRun(ctx, "r2", "test"); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func TestRunDriven(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	if d, err := s.RunDriven("r1"); err != nil || d {
		t.Fatalf("RunDriven before any lock = %v, %v", d, err)
	}
	l, err := s.LockRun("r1")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := s.RunDriven("r1"); err != nil || !d {
		t.Fatalf("RunDriven while locked = %v, %v", d, err)
	}
	l.Unlock()
	if d, err := s.RunDriven("r1"); err != nil || d {
		t.Fatalf("RunDriven after unlock = %v, %v", d, err)
	}
	if _, err := s.LockRun("r1"); err != nil {
		t.Fatalf("lock after RunDriven: %v", err)
	}
}

func TestLockRun(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	l, err := s.LockRun("r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LockRun("r1"); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := s.LockRun("r1")
	if err != nil {
		t.Fatalf("relock: %v", err)
	}
	l2.Unlock()
}

func TestReopenKeepsStateAndAbandon(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	set := newWaitingRun(t, s, "r1", "qa")
	s.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "t", Surface: "terminal", Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}})
	turn, err := s.BeginTurn(ctx, Turn{RunID: "r1", Kind: TurnAnswer, SetID: set.ID})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := open(t, dir)
	last, ok, err := s2.LastTurn(ctx, "r1")
	if err != nil || !ok || last.Seq != turn.Seq || last.Finished {
		t.Fatalf("last turn: %+v %v %v", last, ok, err)
	}
	if err := s2.AbandonTurn(ctx, "r1", turn.Seq); err != nil {
		t.Fatal(err)
	}
	rec, _ := s2.QuestionSet(ctx, set.ID)
	if rec.State != SetAnswered {
		t.Fatalf("after abandon: %s", rec.State)
	}
	if _, err := s2.BeginTurn(ctx, Turn{RunID: "r1", Kind: TurnAnswer, SetID: set.ID}); err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	if err := s2.SetRef(ctx, "discord", "q1", "msg-9"); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s2.RefsFor("discord").Ref(ctx, "q1"); err != nil || !ok || v != "msg-9" {
		t.Fatalf("ref: %q %v %v", v, ok, err)
	}
}

// TestWaitRunFinalSeesAnotherProcessCancel: a run cancelled by another
// process wakes WaitRunFinal (the turn being run is then stopped).
func TestWaitRunFinalSeesAnotherProcessCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := open(t, dir)
	s.pollEvery = time.Hour // the poke must do it
	newWaitingRun(t, s, "r1", "qa")
	got := make(chan Run, 1)
	go func() {
		run, err := s.WaitRunFinal(ctx, "r1")
		if err != nil {
			t.Error(err)
		}
		got <- run
	}()
	time.Sleep(20 * time.Millisecond)
	if err := open(t, dir).CancelRun(ctx, "r1", "test"); err != nil {
		t.Fatal(err)
	}
	select {
	case run := <-got:
		if run.Status != RunCancelled {
			t.Fatalf("status = %s", run.Status)
		}
	case <-ctx.Done():
		t.Fatal("waiter never woke")
	}
}

// TestOpenRefusesADamagedFile: an empty, truncated or foreign database file
// is an error naming the file, never a fresh store.
func TestOpenRefusesADamagedFile(t *testing.T) {
	ctx := context.Background()
	good := t.TempDir()
	st, err := Open(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateRun(ctx, Run{ID: "r1", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	whole, err := os.ReadFile(filepath.Join(good, FileName))
	if err != nil || len(whole) < 4096 {
		t.Fatalf("database: %d bytes, %v", len(whole), err)
	}
	for name, content := range map[string][]byte{
		"empty":        {},
		"short":        whole[:50],
		"half a page":  whole[:len(whole)-100],
		"pages cut":    whole[:len(whole)/2/4096*4096],
		"not a sqlite": bytes.Repeat([]byte("x"), 8192),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, FileName)
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			st, err := Open(ctx, dir)
			if err == nil {
				st.Close()
				t.Fatalf("Open of a %s file succeeded", name)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name %s", err, path)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, content) {
				t.Errorf("the file was changed")
			}
		})
	}
	st, err = Open(ctx, good)
	if err != nil {
		t.Fatalf("the whole file: %v", err)
	}
	st.Close()
}

// TestOpenConcurrentlyOnANewDirectory: several processes starting at once on
// a new state directory all open the one store; none sees a file half made
// by another and takes it for a damaged one.
func TestOpenConcurrentlyOnANewDirectory(t *testing.T) {
	for round := 0; round < 5; round++ {
		dir := t.TempDir()
		errs := make(chan error, 8)
		for i := 0; i < 8; i++ {
			go func() {
				st, err := Open(context.Background(), dir)
				if err == nil {
					_, err = st.ListRuns(context.Background(), RunFilter{})
					st.Close()
				}
				errs <- err
			}()
		}
		for i := 0; i < 8; i++ {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		left, _ := filepath.Glob(filepath.Join(dir, FileName+".new-*"))
		if len(left) > 0 {
			t.Errorf("temporary files left: %v", left)
		}
	}
}

// TestLostTurnCategoriesAreTyped: a turn finished by MarkTurnDelivered or
// AbandonTurn reads back with the typed status and categories the run loop
// switches on.
func TestLostTurnCategoriesAreTyped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	for _, tc := range []struct {
		run  string
		lose func(ctx context.Context, runID string, seq int) error
		want executor.Category
	}{
		{"delivered", s.MarkTurnDelivered, CategoryInterrupted},
		{"abandoned", s.AbandonTurn, CategoryNotDelivered},
	} {
		if _, err := s.CreateRun(ctx, Run{ID: tc.run, Prompt: "p"}); err != nil {
			t.Fatal(err)
		}
		turn, err := s.BeginTurn(ctx, Turn{RunID: tc.run, Kind: TurnStart})
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.lose(ctx, tc.run, turn.Seq); err != nil {
			t.Fatal(err)
		}
		last, _, err := s.LastTurn(ctx, tc.run)
		if err != nil || last.Result.Status != executor.StatusIncomplete || last.Result.Category != tc.want {
			t.Errorf("%s: status %q category %q (%v), want %q %q", tc.run, last.Result.Status, last.Result.Category, err,
				executor.StatusIncomplete, tc.want)
		}
	}
}

func TestSpecCostsSumEachSpecsRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	for i, r := range []struct {
		id, spec string
		cost     float64
		status   RunStatus
	}{
		{"r1", "nightly", 0.5, RunDone}, {"r2", "nightly", 0.25, RunStopped}, {"r3", "weekly", 1, RunFailed}, {"r4", "", 9, RunDone},
	} {
		s.now = func() time.Time { return time.Unix(int64(1000+i), 0) }
		if _, err := s.CreateRun(ctx, Run{ID: r.id, Spec: r.spec, Prompt: "p"}); err != nil {
			t.Fatal(err)
		}
		turn, err := s.BeginTurn(ctx, Turn{RunID: r.id, Kind: TurnStart, Prompt: "p", SessionID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.FinishTurn(ctx, r.id, turn.Seq, TurnResult{Status: "success", CostUSD: r.cost}, nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateRun(ctx, r.id, RunUpdate{Status: r.status}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.SpecCosts(ctx, "")
	want := []SpecCost{{Spec: "nightly", Runs: 2, CostUSD: 0.75, LastStatus: RunStopped}, {Spec: "weekly", Runs: 1, CostUSD: 1, LastStatus: RunFailed}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("SpecCosts = %+v, %v; want %+v", got, err, want)
	}
	if got, err := s.SpecCosts(ctx, "weekly"); err != nil || len(got) != 1 || got[0].Spec != "weekly" {
		t.Fatalf("SpecCosts(weekly) = %+v, %v", got, err)
	}
}
