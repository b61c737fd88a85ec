package store

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestScheduleTickMakesOneRun: of the instances that make the run of the
// same spec and tick, one does; the others get ErrTickTaken and store
// nothing. Another tick makes another run.
func TestScheduleTickMakesOneRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stores := []*Store{open(t, dir), open(t, dir), open(t, dir)}
	ctx := context.Background()
	tick := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	var made, taken atomic.Int32
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.CreateRun(ctx, Run{ID: "r" + string(rune('a'+i)), Spec: "nightly", Prompt: "p", Tick: tick})
			switch {
			case err == nil:
				made.Add(1)
			case errors.Is(err, ErrTickTaken):
				taken.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if made.Load() != 1 || taken.Load() != 2 {
		t.Fatalf("made %d, taken %d; want 1 and 2", made.Load(), taken.Load())
	}
	runs, err := stores[0].ListRuns(ctx, RunFilter{Spec: "nightly"})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %d, %v; want 1", len(runs), err)
	}
	if _, err := stores[1].CreateRun(ctx, Run{ID: "rnext", Spec: "nightly", Prompt: "p", Tick: tick.Add(time.Minute)}); err != nil {
		t.Fatalf("the next tick: %v", err)
	}
	if _, err := stores[1].CreateRun(ctx, Run{ID: "rother", Spec: "other", Prompt: "p", Tick: tick}); err != nil {
		t.Fatalf("another spec's same tick: %v", err)
	}
}

// TestSessionRecordRoundTrip: a session record comes back as saved, the
// newest save wins, and a missing one says so.
func TestSessionRecordRoundTrip(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	ctx := context.Background()
	if _, err := s.CreateRun(ctx, Run{ID: "r1", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Session(ctx, "r1", "sess"); ok || err != nil {
		t.Fatalf("before a save: ok %v, err %v", ok, err)
	}
	first := []byte(strings.Repeat(`{"type":"user","message":"hello"}`+"\n", 1000))
	if err := s.SaveSession(ctx, "r1", "sess", first); err != nil {
		t.Fatal(err)
	}
	second := append(bytes.Clone(first), []byte(`{"type":"assistant","message":"\u0000 binary-safe \xff"}`+"\n")...)
	if err := s.SaveSession(ctx, "r1", "sess", second); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Session(ctx, "r1", "sess")
	if err != nil || !ok || !bytes.Equal(got, second) {
		t.Fatalf("Session = %d bytes, %v, %v; want the second save (%d bytes)", len(got), ok, err, len(second))
	}
}

// TestClaimableRuns: the runs an instance may take up are the queued, the
// interrupted, the running ones nobody holds, and the waiting ones with an
// answered set — not those tied to another host, not final ones, not those
// waiting on a question still pending.
func TestClaimableRuns(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	ctx := context.Background()
	for _, r := range []Run{
		{ID: "queued", Status: RunQueued},
		{ID: "interrupted", Status: RunInterrupted},
		{ID: "orphan", Status: RunRunning},
		{ID: "elsewhere", Status: RunQueued, Host: "another-host"},
		{ID: "here", Status: RunQueued, Host: "this-host"},
		{ID: "done", Status: RunDone},
	} {
		r.Prompt = "p"
		if _, err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"pending", "answered"} {
		if _, err := s.CreateRun(ctx, Run{ID: id, Prompt: "p"}); err != nil {
			t.Fatal(err)
		}
		turn, err := s.BeginTurn(ctx, Turn{RunID: id, Kind: TurnStart, Prompt: "p"})
		if err != nil {
			t.Fatal(err)
		}
		set := testSet(id, 1, id+"-q")
		if err := s.FinishTurn(ctx, id, turn.Seq, TurnResult{Status: "success"}, &set, nil); err != nil {
			t.Fatal(err)
		}
		if id == "answered" {
			if _, err := s.RecordAnswer(ctx, answerAll(set, "A")); err != nil {
				t.Fatal(err)
			}
		}
	}
	runs, err := s.ClaimableRuns(ctx, "this-host", 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	if got, want := strings.Join(ids, " "), "queued interrupted orphan here answered"; got != want {
		t.Fatalf("claimable = %s\nwant        %s", got, want)
	}
	// A queued run taken on another host is tied to it; a host once set
	// stays.
	if err := s.SetRunHost(ctx, "queued", "another-host"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRunHost(ctx, "queued", "this-host"); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Run(ctx, "queued"); err != nil || r.Host != "another-host" {
		t.Fatalf("host of the queued run %q, %v; want another-host", r.Host, err)
	}
	if err := s.UpdateRun(ctx, "queued", RunUpdate{Status: RunInterrupted}); err != nil {
		t.Fatal(err)
	}
	if s.Shared() {
		lock, err := s.LockRun("orphan")
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Unlock()
		runs, err := s.ClaimableRuns(ctx, "this-host", 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 2 || runs[0].ID != "interrupted" || runs[1].ID != "here" {
			t.Fatalf("with orphan leased and limit 2: %v", runs)
		}
	}
}

// TestLeaseOneHolderAndTakeOver: on a shared store a run's lease has one
// holder; given back, it is free; a holder that stops renewing loses it
// after the TTL, and its Lost says so once another instance took it.
func TestLeaseOneHolderAndTakeOver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	if !a.Shared() {
		// SQLite's runs have file locks (TestLockRun).
		if a.Instance() == "" {
			t.Fatal("no instance ID")
		}
		return
	}
	ctx := context.Background()
	if _, err := a.CreateRun(ctx, Run{ID: "r1", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	a.SetLeaseTTL(time.Second)
	b.SetLeaseTTL(time.Second)
	la, err := a.LockRun("r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.LockRun("r1"); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), a.Instance()) {
		t.Fatalf("second holder: %v; want ErrLocked naming %s", err, a.Instance())
	}
	if driven, err := b.RunDriven("r1"); !driven || err != nil {
		t.Fatalf("RunDriven = %v, %v while leased", driven, err)
	}
	if l, ok, err := b.RunLease(ctx, "r1"); !ok || err != nil || l.Owner != a.Instance() {
		t.Fatalf("RunLease = %+v, %v, %v", l, ok, err)
	}
	// Renewed while held: still a's after several TTLs.
	time.Sleep(2500 * time.Millisecond)
	if _, err := b.LockRun("r1"); !errors.Is(err, ErrLocked) {
		t.Fatalf("after 2.5 TTLs of renewals: %v; want ErrLocked", err)
	}
	if err := la.Unlock(); err != nil {
		t.Fatal(err)
	}
	lb, err := b.LockRun("r1")
	if err != nil {
		t.Fatalf("after the lease was given back: %v", err)
	}
	// b stalls (its renewals stop) and a takes the run over once the
	// lease expired: b's lock says it is lost.
	close(lb.stop)
	<-lb.done
	lb.release = nil
	var la2 *Lock
	waitUntil(t, "the stalled lease expired and taken over", func() bool {
		la2, err = a.LockRun("r1")
		return err == nil
	})
	defer la2.Unlock()
	// b's renewal finds the lease someone else's.
	lb2 := &Lock{lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go b.renewLease("r1", lb2)
	select {
	case <-lb2.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease taken over is not reported lost")
	}
}

// TestLeadOneAtATime: of the instances that want to lead, one does at a
// time; when it stops, another takes over.
func TestLeadOneAtATime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var leading atomic.Int32
	var most atomic.Int32
	started := make(chan string, 4)
	lead := func(s *Store, name string, stop <-chan struct{}) {
		s.Lead(ctx, "test", 100*time.Millisecond, func(lctx context.Context) {
			n := leading.Add(1)
			if n > most.Load() {
				most.Store(n)
			}
			started <- name
			select {
			case <-lctx.Done():
			case <-stop:
			}
			leading.Add(-1)
			<-lctx.Done() // leads until its context ends
		})
	}
	if !a.Shared() {
		// On SQLite the one serve leads at once.
		done := make(chan struct{})
		go func() {
			a.Lead(ctx, "test", time.Second, func(context.Context) { close(done) })
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("SQLite's Lead did not call fn at once")
		}
		return
	}
	stopA, stopB := make(chan struct{}), make(chan struct{})
	actx, cancelA := context.WithCancel(ctx)
	go func() {
		a.Lead(actx, "test", 100*time.Millisecond, func(lctx context.Context) {
			leading.Add(1)
			started <- "a"
			select {
			case <-lctx.Done():
			case <-stopA:
			}
			leading.Add(-1)
		})
	}()
	if first := <-started; first != "a" {
		t.Fatalf("first leader %s", first)
	}
	go lead(b, "b", stopB)
	select {
	case name := <-started:
		t.Fatalf("%s leads while a does", name)
	case <-time.After(time.Second):
	}
	cancelA() // a stops (its process ends): b takes over
	select {
	case name := <-started:
		if name != "b" {
			t.Fatalf("then %s leads, want b", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nobody took over the lead")
	}
	if most.Load() > 1 {
		t.Fatalf("%d led at once", most.Load())
	}
	close(stopB)
}

// TestWaitChangeWokenByAnotherInstance: a submitted run pokes the other
// instances' workers at once.
func TestWaitChangeWokenByAnotherInstance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	a.pollEvery = time.Hour // only the poke can wake it in time
	ctx := context.Background()
	woke := make(chan error, 1)
	go func() { woke <- a.WaitChange(ctx) }()
	time.Sleep(300 * time.Millisecond) // a listens
	if _, err := b.CreateRun(ctx, Run{ID: "r1", Prompt: "p", Status: RunQueued}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitChange not woken by another instance's queued run")
	}
}

func waitUntil(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// answerAll answers every question of set with label.
func answerAll(set questions.Set, label string) questions.Response {
	resp := questions.Response{SetID: set.ID, By: "alice", Surface: "cli", At: time.Now()}
	for _, q := range set.Questions {
		resp.Answers = append(resp.Answers, questions.Answer{QuestionID: q.ID, Labels: []string{label}})
	}
	return resp
}

// testTwoSchemasLeadApart: two orchestrators in two schemas of one
// database (two teams, or two tests) each have a leader: advisory locks,
// the database's, are keyed by schema.
func testTwoSchemasLeadApart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	led := make(chan string, 2)
	for _, name := range []string{"a", "b"} {
		s, err := OpenDatabase(ctx, t.TempDir(), pgtest.Schema(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		go s.Lead(ctx, "serve", 100*time.Millisecond, func(lctx context.Context) {
			led <- name
			<-lctx.Done()
		})
	}
	for i := 0; i < 2; i++ {
		select {
		case <-led:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of the two schemas' instances lead; want both", i)
		}
	}
}

// TestInstancesHeartbeatAndGoodbye: an instance is listed from its
// heartbeat, with what it said, until it says goodbye.
func TestInstancesHeartbeatAndGoodbye(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	ctx := context.Background()
	started := time.Now().Add(-time.Minute)
	if err := a.Heartbeat(ctx, started, true, 2); err != nil {
		t.Fatal(err)
	}
	if err := b.Heartbeat(ctx, time.Now(), false, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Heartbeat(ctx, started, true, 3); err != nil { // beats again
		t.Fatal(err)
	}
	list, err := b.Instances(ctx, time.Now().Add(-time.Minute))
	if err != nil || len(list) != 2 {
		t.Fatalf("instances %+v, %v; want 2", list, err)
	}
	if in := list[0]; in.ID != a.Instance() || !in.Leader || in.Driving != 3 || in.PID == 0 {
		t.Errorf("first instance %+v; want a, leading, driving 3", in)
	}
	if err := a.Goodbye(ctx); err != nil {
		t.Fatal(err)
	}
	if list, err := b.Instances(ctx, time.Now().Add(-time.Minute)); err != nil || len(list) != 1 || list[0].ID != b.Instance() {
		t.Fatalf("after a's goodbye: %+v, %v", list, err)
	}
}
