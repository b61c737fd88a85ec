package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestAggregatesCountWithoutListing: the aggregate reads count runs by
// spec and status, pending sets and their unanswered questions by spec and
// kind, the newest active run of each spec, and list the newest waiting
// sets with the total, each in a fixed number of statements whatever the
// number of runs; the filters (spec, status, kind) narrow them.
func TestAggregatesCountWithoutListing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	start := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	if err := s.SeedWaitingRuns(ctx, Seed{Prefix: "w", Runs: 30, Specs: []string{"nightly", "weekly", ""}, Start: start}); err != nil {
		t.Fatal(err)
	}
	// A run of a prompt waiting on two questions, one of them answered.
	set := newWaitingRun(t, s, "p2", "qa", "qb")
	if _, err := s.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "alice", Surface: "cli",
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); err != nil {
		t.Fatal(err)
	}
	for i, st := range []RunStatus{RunDone, RunDone, RunFailed} {
		id := fmt.Sprintf("d%d", i)
		if _, err := s.CreateRun(ctx, Run{ID: id, Spec: "nightly", Prompt: "do it"}); err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateRun(ctx, id, RunUpdate{Status: st, AddCost: 1.5}); err != nil {
			t.Fatal(err)
		}
	}

	n0 := s.Statements()
	counts, err := s.RunCounts(ctx, AggFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]RunCount{}
	for _, c := range counts {
		got[c.Spec+"/"+string(c.Status)] = c
	}
	for k, want := range map[string]int{"nightly/waiting": 10, "weekly/waiting": 10, "/waiting": 11, "nightly/done": 2, "nightly/failed": 1} {
		if got[k].Runs != want {
			t.Errorf("runs %s = %d, want %d (%+v)", k, got[k].Runs, want, counts)
		}
	}
	if c := got["nightly/done"]; c.CostUSD != 3 || c.LastUpdated.IsZero() {
		t.Errorf("nightly/done = %+v, want $3 and a last change", c)
	}
	if len(counts) != 5 {
		t.Errorf("run counts = %+v, want 5 groups", counts)
	}

	pending, err := s.PendingCounts(ctx, AggFilter{})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]PendingCount{}
	for _, c := range pending {
		byKey[c.Spec+"/"+c.Kind] = c
	}
	if c := byKey["nightly/marker"]; c.Sets != 10 || c.Questions != 10 || !c.Oldest.Equal(start) ||
		!c.Newest.Equal(start.Add(27*time.Millisecond)) {
		t.Errorf("nightly pending = %+v, want 10 sets, 10 questions, oldest %v", c, start)
	}
	if c := byKey["/marker"]; c.Sets != 11 || c.Questions != 11 { // p2: one of two answered
		t.Errorf("prompt pending = %+v, want 11 sets and 11 questions", c)
	}
	if len(pending) != 3 {
		t.Errorf("pending = %+v, want 3 groups", pending)
	}

	recs, total, err := s.NewestWaitingSets(ctx, WaitingFilter{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if total != 31 || len(recs) != 5 || recs[0].Set.ID != set.ID || recs[1].Set.ID != "w000029-s1" || recs[4].Set.ID != "w000026-s1" {
		t.Errorf("newest 5 of %d: %v", total, setIDs(recs))
	}
	if len(recs[0].Response.Answers) != 1 || recs[0].State != SetPending {
		t.Errorf("newest set = %+v, want its answer so far", recs[0])
	}
	active, err := s.NewestActive(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if a := active["nightly"]; a.RunID != "w000027" || a.Status != RunWaiting || len(active) != 3 {
		t.Errorf("newest active = %+v", active)
	}
	if n := s.Statements() - n0; n != 6 {
		t.Errorf("the aggregate reads sent %d statements, want 6", n)
	}

	// Filters.
	counts, err = s.RunCounts(ctx, AggFilter{Spec: "nightly", Status: []RunStatus{RunDone, RunFailed}})
	if err != nil || len(counts) != 2 || counts[0].Status != RunDone || counts[0].Runs != 2 {
		t.Errorf("nightly done/failed counts = %+v, %v", counts, err)
	}
	pending, err = s.PendingCounts(ctx, AggFilter{Spec: "weekly"})
	if err != nil || len(pending) != 1 || pending[0].Spec != "weekly" || pending[0].Sets != 10 {
		t.Errorf("weekly pending = %+v, %v", pending, err)
	}
	if pending, err = s.PendingCounts(ctx, AggFilter{Kind: []string{questions.KindApproval}}); err != nil || len(pending) != 0 {
		t.Errorf("approvals pending = %+v, %v", pending, err)
	}
	recs, total, err = s.NewestWaitingSets(ctx, WaitingFilter{Spec: "weekly", Kind: []string{questions.KindMarker}, Limit: 2})
	if err != nil || total != 10 || len(recs) != 2 || recs[0].Set.ID != "w000028-s1" || recs[1].Set.ID != "w000025-s1" {
		t.Errorf("weekly waiting = %v of %d, %v", setIDs(recs), total, err)
	}
	if recs, total, err = s.NewestWaitingSets(ctx, WaitingFilter{Spec: "nope"}); err != nil || total != 0 || len(recs) != 0 {
		t.Errorf("waiting of no spec = %v of %d, %v", setIDs(recs), total, err)
	}
	if recs, total, err = s.NewestWaitingSets(ctx, WaitingFilter{}); err != nil || total != 31 || len(recs) != 31 {
		t.Errorf("every waiting set: %d of %d, %v", len(recs), total, err)
	}
	if active, err = s.NewestActive(ctx, "weekly"); err != nil || len(active) != 1 || active["weekly"].RunID != "w000028" {
		t.Errorf("newest active of weekly = %+v, %v", active, err)
	}
}

func setIDs(recs []SetRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Set.ID)
	}
	return out
}
