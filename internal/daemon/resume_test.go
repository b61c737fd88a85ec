package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

func TestResumeDrivesARunAgainOnce(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	f := newFakeRuns(st, "")
	d, err := New(Config{Runs: f, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Resume(context.Background(), "r", ""); !errors.Is(err, ErrNotServing) {
		t.Fatalf("Resume before Run: %v, want ErrNotServing", err)
	}
	s := start(t, d)
	createRun(t, st, "r", "", store.RunInterrupted) // after the take-up on start
	if err := d.Resume(context.Background(), "r", ""); err != nil {
		t.Fatal(err)
	}
	c := f.next(t)
	if c.runID != "r" {
		t.Fatalf("drove %s", c.runID)
	}
	if err := d.Resume(context.Background(), "r", ""); !errors.Is(err, ErrDriving) {
		t.Fatalf("Resume while driven: %v, want ErrDriving", err)
	}
	c.finish <- store.RunDone
	<-c.returned
	for deadline := time.Now().Add(wait); len(d.Running()) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still driving %v", d.Running())
		}
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := d.Resume(context.Background(), "r", ""); !errors.Is(err, ErrNotServing) {
		t.Fatalf("Resume after shutdown: %v, want ErrNotServing", err)
	}
}
