package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestFencingToken: each take of a run's lock gets a higher fencing token;
// the writes of a turn made with an older take's token are refused with
// ErrLeaseLost (turns, the session, the run), and so are the hook's checks
// and its tool-call records, while the current take's go through.
func TestFencingToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	ctx := context.Background()
	if _, err := s.CreateRun(ctx, Run{ID: "r1", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	l1, err := s.LockRun("r1")
	if err != nil {
		t.Fatal(err)
	}
	t1 := l1.Token()
	if t1 <= 0 {
		t.Fatalf("first token %d, want > 0", t1)
	}
	c1 := WithFence(ctx, "r1", t1)
	if _, err := s.BeginTurn(c1, Turn{RunID: "r1", Kind: TurnStart, Prompt: "p"}); err != nil {
		t.Fatalf("begin a turn with the current token: %v", err)
	}
	if err := s.CheckFence(ctx, "r1", t1); err != nil {
		t.Fatalf("CheckFence(current) = %v", err)
	}
	if again, err := s.ToolCallStarted(ctx, "r1", "toolu_1", "Bash", "echo 1", t1); err != nil || again {
		t.Fatalf("a tool call of the current take: %v, %v", again, err)
	}
	if again, err := s.ToolCallStarted(ctx, "r1", "toolu_1", "Bash", "echo 1", t1); err != nil || !again {
		t.Fatalf("the same tool call again: again = %v, %v; want true", again, err)
	}
	if err := l1.Unlock(); err != nil {
		t.Fatal(err)
	}
	// Given back: the token fences nothing in any more.
	if err := s.CheckFence(ctx, "r1", t1); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("CheckFence after the lock was given back = %v, want ErrLeaseLost", err)
	}
	// Another open of the store (another process) takes the lock again.
	o := open(t, dir)
	l2, err := o.LockRun("r1")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Unlock()
	t2 := l2.Token()
	if t2 <= t1 {
		t.Fatalf("second token %d, want more than the first's %d", t2, t1)
	}
	stale := []struct {
		what string
		err  error
	}{
		{"begin turn", func() error {
			_, err := s.BeginTurn(c1, Turn{RunID: "r1", Kind: TurnContinue, Prompt: "q"})
			return err
		}()},
		{"finish turn", s.FinishTurn(c1, "r1", 1, TurnResult{Status: "success"}, nil, nil)},
		{"mark delivered", s.MarkTurnDelivered(c1, "r1", 1)},
		{"abandon turn", s.AbandonTurn(c1, "r1", 1)},
		{"save session", s.SaveSession(c1, "r1", "sess", []byte("{}\n"))},
		{"update run", s.UpdateRun(c1, "r1", RunUpdate{Status: RunFailed})},
		{"check", s.CheckFence(ctx, "r1", t1)},
		{"tool call", func() error { _, err := s.ToolCallStarted(ctx, "r1", "toolu_2", "Bash", "echo 2", t1); return err }()},
	}
	for _, c := range stale {
		if !errors.Is(c.err, ErrLeaseLost) {
			t.Errorf("%s with the stale token: %v, want ErrLeaseLost", c.what, c.err)
		}
	}
	if r, err := s.Run(ctx, "r1"); err != nil || r.Status == RunFailed {
		t.Fatalf("run %s (%v): the stale write went through", r.Status, err)
	}
	if _, ok, _ := s.Session(ctx, "r1", "sess"); ok {
		t.Fatal("the stale session write went through")
	}
	c2 := WithFence(ctx, "r1", t2)
	if err := s.FinishTurn(c2, "r1", 1, TurnResult{Status: "success"}, nil, nil); err != nil {
		t.Fatalf("finish with the current token: %v", err)
	}
	if err := s.SaveSession(c2, "r1", "sess", []byte("{}\n")); err != nil {
		t.Fatalf("save the session with the current token: %v", err)
	}
	if _, err := o.ToolCallStarted(ctx, "r1", "toolu_3", "Bash", "echo 3", t2); err != nil {
		t.Fatal(err)
	}
	if err := o.ToolCallFinished(ctx, "r1", "toolu_3", "3"); err != nil {
		t.Fatal(err)
	}
	calls, err := s.ToolCallsOf(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || calls[0].ToolUseID != "toolu_1" || calls[0].Finished || calls[0].Token != t1 ||
		calls[1].ToolUseID != "toolu_3" || !calls[1].Finished || calls[1].Token != t2 || calls[1].Input != "echo 3" || calls[1].Result != "3" {
		t.Fatalf("tool calls = %+v, want toolu_1 (started) and toolu_3 (finished)", calls)
	}
	// A context fenced for another run fences nothing here.
	if err := s.UpdateRun(WithFence(ctx, "other", 1), "r1", RunUpdate{}); err != nil {
		t.Fatalf("a fence of another run: %v", err)
	}
}

// TestFencingTakeOverRefusesTheStalledHolder: on a shared store, a holder
// that stalls past its lease is taken over; its writes are refused from
// then on, and its lock says it is lost.
func TestFencingTakeOverRefusesTheStalledHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	if !a.Shared() {
		return // one process per state directory: its file lock is never taken over
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
	ca := WithFence(ctx, "r1", la.Token())
	// a stalls: its renewals stop.
	close(la.stop)
	<-la.done
	la.release = nil
	if st, err := b.RunLeaseState(ctx, "r1"); err != nil || st.Owner != a.Instance() || st.Token != la.Token() || st.Left <= 0 {
		t.Fatalf("lease state %+v, %v; want a's, live", st, err)
	}
	var lb *Lock
	waitUntil(t, "the stalled lease taken over", func() bool {
		lb, err = b.LockRun("r1")
		return err == nil
	})
	defer lb.Unlock()
	if lb.Token() <= la.Token() {
		t.Fatalf("the taker's token %d, want more than %d", lb.Token(), la.Token())
	}
	if _, err := a.BeginTurn(ca, Turn{RunID: "r1", Kind: TurnStart, Prompt: "p"}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the stalled holder's write: %v, want ErrLeaseLost", err)
	}
	if _, err := b.BeginTurn(WithFence(ctx, "r1", lb.Token()), Turn{RunID: "r1", Kind: TurnStart, Prompt: "p"}); err != nil {
		t.Fatalf("the taker's write: %v", err)
	}
}

// TestLeaseLostBeforeItCanBeTakenOver: a holder whose renewals fail (the
// database out of reach) says its lease is lost after half the TTL, before
// any other instance may take it: the time to stop its CLI.
func TestLeaseLostBeforeItCanBeTakenOver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := open(t, dir)
	if !a.Shared() {
		return
	}
	ctx := context.Background()
	if _, err := a.CreateRun(ctx, Run{ID: "r1", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	a.SetLeaseTTL(2 * time.Second)
	la, err := a.LockRun("r1")
	if err != nil {
		t.Fatal(err)
	}
	la.release = nil
	// The database goes out of reach for this process.
	a.db.Close()
	<-la.Lost()
	b := open(t, dir)
	st, err := b.RunLeaseState(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Left <= 0 {
		t.Fatalf("the lease had expired (%s left) when its holder said it lost it: another instance could have taken it while the CLI ran", time.Duration(st.Left))
	}
}
