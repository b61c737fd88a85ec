package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// One run per person and Idempotency-Key, whichever of several processes
// asks: a retry gets the first run (ErrRequestReplayed), the same key with
// another body ErrRequestReused, another person's same key a run of its
// own; the key's row and the run are made in one transaction.
func TestRunRequestOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir) // two processes on one store
	req := RunRequest{By: "alice", Key: "k-1", BodySHA256: "sum-1"}
	mk := func(s *Store, id string, req RunRequest) (Run, error) {
		r := req
		return s.CreateRun(ctx, Run{ID: id, Prompt: "p", Status: RunQueued, Request: &r})
	}

	const n = 8
	var wg sync.WaitGroup
	got := make([]Run, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			got[i], errs[i] = mk(s, fmt.Sprintf("run-%d", i), req)
		}()
	}
	wg.Wait()
	made := ""
	for i := range n {
		switch {
		case errs[i] == nil:
			if made != "" {
				t.Fatalf("two runs made for one key: %s and %s", made, got[i].ID)
			}
			made = got[i].ID
		case !errors.Is(errs[i], ErrRequestReplayed):
			t.Fatalf("attempt %d: %v", i, errs[i])
		}
	}
	if made == "" {
		t.Fatal("no run made")
	}
	for i := range n {
		if got[i].ID != made || got[i].Status != RunQueued {
			t.Errorf("attempt %d got run %s (%s), want %s queued", i, got[i].ID, got[i].Status, made)
		}
	}
	if runs, err := a.ListRuns(ctx, RunFilter{}); err != nil || len(runs) != 1 {
		t.Fatalf("runs in the store: %d (%v), want 1", len(runs), err)
	}

	// The same key with another body.
	other := req
	other.BodySHA256 = "sum-2"
	if _, err := mk(a, "run-x", other); !errors.Is(err, ErrRequestReused) {
		t.Fatalf("reused key: %v, want ErrRequestReused", err)
	}
	// Another person's key of the same name: a run of its own.
	bob := req
	bob.By = "bob"
	if r, err := mk(b, "run-bob", bob); err != nil || r.ID != "run-bob" {
		t.Fatalf("bob's request: %v %v", r.ID, err)
	}
	if runs, _ := a.ListRuns(ctx, RunFilter{}); len(runs) != 2 {
		t.Fatalf("runs in the store: %d, want 2 (a reused key makes none)", len(runs))
	}
	if _, err := mk(a, "run-y", RunRequest{By: "alice"}); err == nil {
		t.Fatal("a request without a key made a run")
	}
}
