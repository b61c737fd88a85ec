package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// doneRun makes a run whose one turn succeeded and which is done.
func doneRun(t *testing.T, s *Store, runID string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CreateRun(ctx, Run{ID: runID, Prompt: "do it", SessionID: "sess-1"}); err != nil {
		t.Fatal(err)
	}
	turn, err := s.BeginTurn(ctx, Turn{RunID: runID, Kind: TurnStart, Prompt: "do it", SessionID: "sess-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.FinishTurn(ctx, runID, turn.Seq, TurnResult{Status: "success", SessionID: "sess-1"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateRun(ctx, runID, RunUpdate{Status: RunDone}); err != nil {
		t.Fatal(err)
	}
}

func TestQueueFollowUpRequeuesOnce(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	ctx := context.Background()
	doneRun(t, s, "r1")
	at := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	// The same event, delivered several times at once: one follow-up.
	var wg sync.WaitGroup
	created := make(chan bool, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, c, err := s.QueueFollowUp(ctx, "r1", "github:review-comment:1", "alice", "github", "please also add a test", at)
			if err != nil {
				t.Error(err)
			}
			created <- c
		}()
	}
	wg.Wait()
	close(created)
	n := 0
	for c := range created {
		if c {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("created %d follow-ups, want 1", n)
	}
	run, err := s.Run(ctx, "r1")
	if err != nil || run.Status != RunQueued {
		t.Fatalf("run after feedback: %v %v, want queued", run.Status, err)
	}
	fus, err := s.FollowUps(ctx, "r1")
	if err != nil || len(fus) != 1 || fus[0].Who != "alice" || fus[0].Text != "please also add a test" || !fus[0].At.Equal(at) || fus[0].Turn != 0 {
		t.Fatalf("follow-ups = %+v, %v", fus, err)
	}
	// The turn that carries it claims it, once.
	f, ok, err := s.PendingFollowUp(ctx, "r1")
	if err != nil || !ok || f.ID != FollowUpID("github:review-comment:1") {
		t.Fatalf("pending = %+v %v %v", f, ok, err)
	}
	turn, err := s.BeginTurn(ctx, Turn{RunID: "r1", Kind: TurnFollowUp, FollowUpID: f.ID, Prompt: "feedback", SessionID: "sess-1", Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginTurn(ctx, Turn{RunID: "r1", Kind: TurnFollowUp, FollowUpID: f.ID, Prompt: "feedback", SessionID: "sess-1", Resume: true}); !errors.Is(err, ErrNotClaimable) {
		t.Fatalf("second claim: %v, want ErrNotClaimable", err)
	}
	if _, ok, _ := s.PendingFollowUp(ctx, "r1"); ok {
		t.Fatal("claimed follow-up still pending")
	}
	// A turn whose prompt never reached the session gives it back.
	if err := s.AbandonTurn(ctx, "r1", turn.Seq); err != nil {
		t.Fatal(err)
	}
	if f2, ok, _ := s.PendingFollowUp(ctx, "r1"); !ok || f2.ID != f.ID {
		t.Fatal("abandoned follow-up not pending again")
	}
	// The same key again after all that: still the one follow-up.
	if _, c, err := s.QueueFollowUp(ctx, "r1", "github:review-comment:1", "alice", "github", "edited text", at); err != nil || c {
		t.Fatalf("again: created %v, %v", c, err)
	}
	if fus, _ := s.FollowUps(ctx, "r1"); len(fus) != 1 || fus[0].Text != "please also add a test" {
		t.Fatalf("follow-ups = %+v", fus)
	}
}

func TestQueueFollowUpRefusals(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	ctx := context.Background()
	doneRun(t, s, "r1")
	doneRun(t, s, "r2")
	if _, _, err := s.QueueFollowUp(ctx, "nope", "k0", "a", "cli", "x", time.Time{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown run: %v", err)
	}
	if _, _, err := s.QueueFollowUp(ctx, "r1", "k1", "a", "cli", "  ", time.Time{}); err == nil {
		t.Error("empty feedback accepted")
	}
	if _, _, err := s.QueueFollowUp(ctx, "r1", "k2", "a", "cli", "x", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.QueueFollowUp(ctx, "r2", "k2", "a", "cli", "x", time.Time{}); err == nil {
		t.Error("one key for two runs accepted")
	}
	if err := s.CancelRun(ctx, "r2", "test"); err == nil {
		t.Fatal("cancelling a done run should fail") // done is final: it stays done
	}
	if _, err := s.CreateRun(ctx, Run{ID: "r3", Prompt: "p", Status: RunQueued}); err != nil {
		t.Fatal(err)
	}
	if err := s.CancelRun(ctx, "r3", "test"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.QueueFollowUp(ctx, "r3", "k3", "a", "cli", "x", time.Time{}); !errors.Is(err, ErrFollowUpRefused) {
		t.Errorf("cancelled run: %v, want ErrFollowUpRefused", err)
	}
}

func TestFollowUpWhileRunningRequeuedAfterDone(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	ctx := context.Background()
	if _, err := s.CreateRun(ctx, Run{ID: "r1", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	if _, c, err := s.QueueFollowUp(ctx, "r1", "k", "a", "cli", "more", time.Time{}); err != nil || !c {
		t.Fatal(c, err)
	}
	if run, _ := s.Run(ctx, "r1"); run.Status != RunRunning {
		t.Fatalf("a running run became %s", run.Status)
	}
	if err := s.UpdateRun(ctx, "r1", RunUpdate{Status: RunDone}); err != nil {
		t.Fatal(err)
	}
	if q, err := s.RequeueForFollowUps(ctx, "r1"); err != nil || !q {
		t.Fatalf("requeue: %v %v", q, err)
	}
	if run, _ := s.Run(ctx, "r1"); run.Status != RunQueued {
		t.Fatalf("run is %s, want queued", run.Status)
	}
}

func TestReopenDelivery(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	ctx := context.Background()
	doneRun(t, s, "r1")
	dl := Delivery{RunID: "r1", RepoDir: "/repo", Worktree: "/wt/r1", Branch: "b", Base: "main", BaseCommit: "base",
		State: DeliveryOpened, CommitSHA: "c1", Pushed: true, PRNumber: 4, PRURL: "u", Commented: true, RemovedAt: time.Now()}
	if err := s.SaveDelivery(ctx, dl); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.ReopenDelivery(ctx, "r1"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	got, _, _ := s.Delivery(ctx, "r1")
	if got.State != DeliveryPrepared || got.CommitSHA != "c1" || !got.Pushed || got.PRNumber != 4 || !got.Commented || !got.RemovedAt.IsZero() {
		t.Fatalf("reopened = %+v", got)
	}
	if ok, _ := s.ReopenDelivery(ctx, "r1"); ok {
		t.Fatal("reopened twice")
	}
}

func TestRunOfPullRequest(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	ctx := context.Background()
	doneRun(t, s, "r1")
	doneRun(t, s, "r2")
	for _, d := range []Delivery{
		{RunID: "r1", Worktree: "/wt/r1", Branch: "b1", State: DeliveryOpened, PRNumber: 7, PRURL: "https://github.com/Acme/App/pull/7"},
		{RunID: "r2", Worktree: "/wt/r2", Branch: "b2", State: DeliveryOpened, PRNumber: 7, PRURL: "https://github.com/acme/other/pull/7"},
	} {
		if err := s.SaveDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if id, err := s.RunOfPullRequest(ctx, "acme/app", 7); err != nil || id != "r1" {
		t.Errorf("acme/app#7: %q %v", id, err)
	}
	if id, err := s.RunOfPullRequest(ctx, "acme/app", 8); err != nil || id != "" {
		t.Errorf("acme/app#8: %q %v", id, err)
	}
	if prs, err := s.RunPullRequests(ctx, "acme/other", time.Time{}); err != nil || len(prs) != 1 || prs[0] != 7 {
		t.Errorf("acme/other: %v %v", prs, err)
	}
}
