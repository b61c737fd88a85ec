package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestTriggerMakesOneRun: of the instances that take the same event, one
// makes its run, with the decisions; the others get ErrTriggerTaken and
// store nothing. The run's event is found again; the repository's limit
// refuses the runs past it, recording the event.
func TestTriggerMakesOneRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stores := []*Store{open(t, dir), open(t, dir), open(t, dir)}
	ctx := context.Background()
	ev := Trigger{Key: "github:acme/webapp:comment:123", Repo: "acme/webapp", Origin: "github issue acme/webapp#7 comment 123 by alice"}
	var made, taken atomic.Int32
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.CreateTriggeredRun(ctx, Run{ID: "r" + string(rune('a'+i)), Prompt: "p", Status: RunQueued}, ev, 10,
				map[string]string{"issue-of-r" + string(rune('a'+i)): "7"})
			switch {
			case err == nil:
				made.Add(1)
			case errors.Is(err, ErrTriggerTaken):
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
	runs, err := stores[0].ListRuns(ctx, RunFilter{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %d, %v; want 1", len(runs), err)
	}
	id := runs[0].ID
	if runs[0].Status != RunQueued {
		t.Errorf("status %s, want queued", runs[0].Status)
	}
	if d, err := stores[1].CommentDecision(ctx, "issue-of-"+id); err != nil || d != "7" {
		t.Errorf("decision of the run = %q, %v; want 7", d, err)
	}
	for _, other := range []string{"ra", "rb", "rc"} {
		if other == id {
			continue
		}
		if d, _ := stores[1].CommentDecision(ctx, "issue-of-"+other); d != "" {
			t.Errorf("a run not made recorded its decision: %q", d)
		}
	}
	got, ok, err := stores[2].TriggerOf(ctx, id)
	if err != nil || !ok || got.Origin != ev.Origin || got.Outcome != TriggerStarted || got.Key != ev.Key {
		t.Errorf("TriggerOf = %+v, %v, %v", got, ok, err)
	}
	if _, ok, err := stores[2].TriggerOf(ctx, "rnone"); err != nil || ok {
		t.Errorf("TriggerOf a run no event started = %v, %v", ok, err)
	}

	// The limit: one more run of the hour, then refused.
	if _, err := stores[0].CreateTriggeredRun(ctx, Run{ID: "r2", Prompt: "p"}, Trigger{Key: "k2", Repo: "acme/webapp"}, 2, nil); err != nil {
		t.Fatal(err)
	}
	_, err = stores[0].CreateTriggeredRun(ctx, Run{ID: "r3", Prompt: "p"}, Trigger{Key: "k3", Repo: "acme/webapp"}, 2, nil)
	if !errors.Is(err, ErrTriggerLimit) {
		t.Fatalf("past the limit: %v, want ErrTriggerLimit", err)
	}
	if tr, ok, _ := stores[1].TriggerByKey(ctx, "k3"); !ok || tr.Outcome != TriggerLimited {
		t.Errorf("the refused event: %+v, %v", tr, ok)
	}
	if _, err := stores[0].Run(ctx, "r3"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused run was made: %v", err)
	}
	if _, err := stores[0].CreateTriggeredRun(ctx, Run{ID: "r4", Prompt: "p"}, Trigger{Key: "k4", Repo: "acme/other"}, 2, nil); err != nil {
		t.Errorf("another repository's limit: %v", err)
	}

	// Refusals are recorded once.
	first, err := stores[0].RecordTrigger(ctx, Trigger{Key: "k5", Repo: "acme/webapp", Outcome: TriggerRefused})
	if err != nil || !first {
		t.Fatalf("RecordTrigger = %v, %v", first, err)
	}
	again, err := stores[1].RecordTrigger(ctx, Trigger{Key: "k5", Repo: "acme/webapp", Outcome: TriggerRefused})
	if err != nil || again {
		t.Fatalf("RecordTrigger again = %v, %v; want false", again, err)
	}
	if _, err := stores[0].CreateTriggeredRun(ctx, Run{ID: "r5", Prompt: "p"}, Trigger{Key: "k5", Repo: "acme/webapp"}, 0, nil); !errors.Is(err, ErrTriggerTaken) {
		t.Errorf("a refused event makes a run: %v", err)
	}
}

// BenchmarkCreateTriggeredRun: one event recorded with its run (and the
// repository's hourly count read) in one transaction.
func BenchmarkCreateTriggeredRun(b *testing.B) {
	s, err := OpenDatabase(context.Background(), b.TempDir(), "")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("r%d", i)
		if _, err := s.CreateTriggeredRun(ctx, Run{ID: id, Prompt: "p", Status: RunQueued},
			Trigger{Key: "github:acme/webapp:comment:" + id, Repo: "acme/webapp", Origin: "o"}, 1<<30, map[string]string{"k" + id: "7"}); err != nil {
			b.Fatal(err)
		}
	}
}
