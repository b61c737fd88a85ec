package store

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestBulkReadsMatchTheOneByOne: the reads of many rows at once return
// what reading each row alone returns, in a number of statements that does
// not depend on the number of rows.
func TestBulkReadsMatchTheOneByOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	var ids []string
	for i := range 4 {
		id := fmt.Sprintf("r%d", i)
		ids = append(ids, id)
		newWaitingRun(t, s, id, "qa"+id, "qb"+id)
	}
	// A partial answer, a complete one, and a delivery.
	if _, err := s.RecordAnswer(ctx, questions.Response{SetID: "r1-s1", By: "cli", Surface: "cli",
		Answers: []questions.Answer{{QuestionID: "qbr1", Text: "free"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordAnswer(ctx, questions.Response{SetID: "r2-s1", By: "@o", Surface: "github",
		Answers: []questions.Answer{{QuestionID: "qar2", Labels: []string{"A"}}, {QuestionID: "qbr2", Text: "x"}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveDelivery(ctx, Delivery{RunID: "r3", Worktree: "/w/r3", Branch: "orchestrator/r3", State: DeliveryPrepared, CommitSHA: "abc"}); err != nil {
		t.Fatal(err)
	}
	l, err := s.LockRun("r0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()

	n := s.Statements()
	sets, err := s.QuestionSets(ctx, SetFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Statements() - n; got != 2 {
		t.Errorf("QuestionSets of %d sets: %d statements, want 2", len(sets), got)
	}
	if len(sets) != 4 {
		t.Fatalf("sets: %d, want 4", len(sets))
	}
	for _, got := range sets {
		want, err := s.QuestionSet(ctx, got.Set.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("set %s:\n got %+v\nwant %+v", got.Set.ID, got, want)
		}
	}
	if pending, err := s.QuestionSets(ctx, SetFilter{State: []SetState{SetPending}, RunID: "r1"}); err != nil ||
		len(pending) != 1 || len(pending[0].Response.Answers) != 1 {
		t.Fatalf("pending sets of r1: %+v %v", pending, err)
	}

	n = s.Statements()
	runs, err := s.RunsByID(ctx, append(ids, "nope"))
	if err != nil {
		t.Fatal(err)
	}
	dls, err := s.Deliveries(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	leases, err := s.RunLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Statements()-n, int64(2); got > want+1 || (!s.Shared() && got != want) {
		t.Errorf("runs, deliveries and leases: %d statements, want %d (and one for the leases on PostgreSQL)", got, want)
	}
	if len(runs) != len(ids) {
		t.Errorf("runs: %d, want %d", len(runs), len(ids))
	}
	for _, id := range ids {
		want, err := s.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(runs[id], want) {
			t.Errorf("run %s:\n got %+v\nwant %+v", id, runs[id], want)
		}
		d, ok, err := s.Delivery(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got, gotOK := dls[id]; gotOK != ok || !reflect.DeepEqual(got, d) {
			t.Errorf("delivery of %s: %+v %v, want %+v %v", id, got, gotOK, d, ok)
		}
		le, ok, err := s.RunLease(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got, gotOK := leases[id]; gotOK != ok || got != le {
			t.Errorf("lease of %s: %+v %v, want %+v %v", id, got, gotOK, le, ok)
		}
	}
	if _, ok := leases["r0"]; ok != s.Shared() {
		t.Errorf("lease of the locked run r0: %v on a shared store %v", ok, s.Shared())
	}
}
