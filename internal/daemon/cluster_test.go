package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// noAsks is the Asker of daemons whose runs never wait.
type noAsks struct{}

func (noAsks) AskWaiting(ctx context.Context, _ func(error)) error {
	<-ctx.Done()
	return nil
}

// TestClusterInstancesShareTheQueue: two daemons on one PostgreSQL database
// take the queued runs between them, each up to its max_concurrent_runs,
// never one run twice; a run finished frees room for the next.
func TestClusterInstancesShareTheQueue(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	ctx := context.Background()
	open := func() *store.Store {
		st, err := store.OpenDatabase(ctx, t.TempDir(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	drives := make(chan *driveCall, 16)
	var daemons []*Daemon
	for i := 0; i < 2; i++ {
		st := open()
		f := newFakeRuns(st, store.RunRunning)
		f.drives = drives
		d, err := New(Config{Runs: f, Asks: noAsks{}, Store: st, MaxConcurrent: 2, AdoptEvery: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		dctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- d.Run(dctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("daemon: %v", err)
			}
		})
		daemons = append(daemons, d)
	}
	for _, d := range daemons {
		<-d.Ready()
	}
	submit := open()
	for i := 1; i <= 5; i++ {
		if _, err := submit.CreateRun(ctx, store.Run{ID: fmt.Sprintf("q%d", i), Prompt: "p", Status: store.RunQueued}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	var calls []*driveCall
	for len(calls) < 4 {
		select {
		case c := <-drives:
			if seen[c.runID] {
				t.Fatalf("run %s driven twice", c.runID)
			}
			seen[c.runID] = true
			calls = append(calls, c)
		case <-time.After(wait):
			t.Fatalf("%d runs driven, want 4 (two instances, two each)", len(calls))
		}
	}
	select {
	case c := <-drives:
		t.Fatalf("run %s driven beyond the instances' room", c.runID)
	case <-time.After(time.Second):
	}
	for _, d := range daemons {
		if n := len(d.Running()); n != 2 {
			t.Errorf("an instance drives %d runs, want 2", n)
		}
	}
	calls[0].finish <- store.RunDone
	select {
	case c := <-drives:
		if seen[c.runID] {
			t.Fatalf("run %s driven twice", c.runID)
		}
		c.finish <- store.RunDone
	case <-time.After(wait):
		t.Fatal("the fifth run was not taken once there was room")
	}
	for _, c := range calls[1:] {
		c.finish <- store.RunDone
	}
}

// recordingAsks records the calls of AskWaiting: the ask room of the
// runner (runner/room_test.go tests what it asks).
type recordingAsks struct {
	calls chan struct{}
}

func (a *recordingAsks) AskWaiting(ctx context.Context, health func(error)) error {
	health(nil)
	a.calls <- struct{}{}
	<-ctx.Done() // asks until the lead ends
	return nil
}

// TestClusterLeaderAsksWaitingRuns: the leading instance, and it alone,
// runs the ask room while it leads.
func TestClusterLeaderAsksWaitingRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	asks := &recordingAsks{calls: make(chan struct{}, 4)}
	var daemons []*Daemon
	for i := 0; i < 2; i++ {
		st, err := store.OpenDatabase(ctx, t.TempDir(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		d, err := New(Config{Runs: newFakeRuns(st, ""), Asks: asks, Store: st, AdoptEvery: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		dctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- d.Run(dctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("daemon: %v", err)
			}
		})
		daemons = append(daemons, d)
	}
	select {
	case <-asks.calls:
	case <-time.After(wait):
		t.Fatal("no instance runs the ask room")
	}
	select {
	case <-asks.calls:
		t.Fatal("two instances run the ask room at once")
	case <-time.After(500 * time.Millisecond):
	}
	leaders := 0
	for _, d := range daemons {
		if d.Leader() {
			leaders++
		}
	}
	if leaders != 1 {
		t.Errorf("%d instances lead, want 1", leaders)
	}
}
