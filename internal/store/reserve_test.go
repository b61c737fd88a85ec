package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
)

// TestCapReservationOneOfTwoAtOnce: turns of runs started at once, from
// separate stores (instances), under a cap that fits one turn's budget:
// exactly one begins with the budget reserved, the others find the cap
// reached and begin nothing; the reservation counts as spent until the turn
// finishes, when its recorded cost replaces it; a turn abandoned (its
// process died, found by recovery) or of a run that ended holds nothing.
func TestCapReservationOneOfTwoAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	now := time.Now().UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	caps := []CapLimit{{Scope: "nightly", From: day, To: day.AddDate(0, 0, 1), Limit: 2},
		{Scope: CapScopeAll, From: day, To: day.AddDate(0, 0, 1), Limit: 10}}
	const n = 4
	for i := range n {
		if _, err := s.CreateRun(ctx, Run{ID: runName(i), Spec: "nightly", Prompt: "p", Status: RunQueued}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu     sync.Mutex
		begun  []Turn
		wg     sync.WaitGroup
		reachd int
	)
	for i := range n {
		other := open(t, dir)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tn, err := other.BeginTurn(ctx, Turn{RunID: runName(i), Kind: TurnStart, Prompt: "p", Caps: caps, BudgetUSD: 2})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				begun = append(begun, tn)
			case errors.Is(err, ErrCapReached):
				reachd++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if len(begun) != 1 || reachd != n-1 {
		t.Fatalf("%d turns began, %d found the cap reached; want 1 and %d", len(begun), reachd, n-1)
	}
	won := begun[0]
	if won.ReservedUSD != 2 {
		t.Fatalf("reserved %v, want 2", won.ReservedUSD)
	}
	if got, err := s.Turns(ctx, won.RunID); err != nil || len(got) != 1 || got[0].ReservedUSD != 2 {
		t.Fatalf("stored turns = %+v, %v", got, err)
	}
	spent := func(scope string, want float64) {
		t.Helper()
		if got, err := s.Spend(ctx, scope, day, day.AddDate(0, 0, 1)); err != nil || got != want {
			t.Fatalf("Spend(%q) = %v, %v; want %v", scope, got, err, want)
		}
	}
	spent("nightly", 2)
	spent(CapScopeAll, 2)
	spent("other", 0)
	if r, err := s.Reserved(ctx, "nightly", day, day.AddDate(0, 0, 1)); err != nil || r != 2 {
		t.Fatalf("Reserved = %v, %v; want 2", r, err)
	}

	// The turn costs less than it reserved: what is left is free again.
	if err := s.FinishTurn(ctx, won.RunID, won.Seq, TurnResult{Status: executor.StatusSuccess, CostUSD: 0.5}, nil, nil); err != nil {
		t.Fatal(err)
	}
	spent("nightly", 0.5)
	loser := runName(0)
	if loser == won.RunID {
		loser = runName(1)
	}
	tn, err := s.BeginTurn(ctx, Turn{RunID: loser, Kind: TurnStart, Prompt: "p", Caps: caps})
	if err != nil || tn.ReservedUSD != 1.5 {
		t.Fatalf("second turn: reserved %v, %v; want what is left, 1.5", tn.ReservedUSD, err)
	}
	spent("nightly", 2)
	// Its process died: recovery abandons the turn, which frees it.
	if err := s.AbandonTurn(ctx, loser, tn.Seq); err != nil {
		t.Fatal(err)
	}
	spent("nightly", 0.5)
	// A reservation of a run that ended (cancelled while its process was
	// gone) holds nothing either.
	tn, err = s.BeginTurn(ctx, Turn{RunID: loser, Kind: TurnStart, Prompt: "p", Caps: caps, BudgetUSD: 1})
	if err != nil || tn.ReservedUSD != 1 {
		t.Fatalf("third turn: reserved %v, %v; want its budget, 1", tn.ReservedUSD, err)
	}
	spent("nightly", 1.5)
	if err := s.UpdateRun(ctx, loser, RunUpdate{Status: RunCancelled}); err != nil {
		t.Fatal(err)
	}
	spent("nightly", 0.5)
}

func runName(i int) string { return "run-" + string(rune('a'+i)) }
