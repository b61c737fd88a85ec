package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// noAsks is the Asker of daemons whose runs never wait.
type noAsks struct{}

func (noAsks) Ask(context.Context, string) error { return nil }

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

// recordingAsks records the runs asked and fails the first ask of each.
type recordingAsks struct {
	mu    sync.Mutex
	asked map[string]int
	calls chan string
}

func (a *recordingAsks) Ask(ctx context.Context, runID string) error {
	a.mu.Lock()
	a.asked[runID]++
	n := a.asked[runID]
	a.mu.Unlock()
	a.calls <- runID
	if n == 1 {
		return errors.New("every surface failed")
	}
	<-ctx.Done() // asks until the lead ends
	return ctx.Err()
}

// TestClusterLeaderAsksWaitingRuns: the leading instance asks every
// waiting run's questions, a run whose asking failed again after a while,
// and leaves alone a waiting run some process drives.
func TestClusterLeaderAsksWaitingRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.OpenDatabase(ctx, t.TempDir(), pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, id := range []string{"w1", "held"} {
		if _, err := st.CreateRun(ctx, store.Run{ID: id, Prompt: "p", Status: store.RunWaiting}); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := st.LockRun("held") // a foreground `run` waits at its terminal
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	asks := &recordingAsks{asked: map[string]int{}, calls: make(chan string, 16)}
	d, err := New(Config{Runs: newFakeRuns(st, ""), Asks: asks, Store: st, AdoptEvery: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	}()
	for i := 0; i < 2; i++ { // asked, failed, asked again
		select {
		case id := <-asks.calls:
			if id != "w1" {
				t.Fatalf("asked %s; want only w1 (held is driven by another process)", id)
			}
		case <-time.After(wait):
			t.Fatalf("w1 asked %d times, want 2 (again after its asking failed)", i)
		}
	}
	if !d.Leader() {
		t.Error("the one instance does not lead")
	}
}
