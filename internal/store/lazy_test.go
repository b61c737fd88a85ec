package store

import (
	"context"
	"database/sql"
	"testing"
)

// TestLazyCommitsLeaveThePoolFull: writes made with Lazy commit (visible at
// once, to every connection), and the connections they used go back to
// the pool with synchronous=FULL, so a write without the mark still waits
// for the disk.
func TestLazyCommitsLeaveThePoolFull(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	ctx := context.Background()
	if _, err := s.CreateRun(ctx, Run{ID: "r1", Prompt: "do it"}); err != nil {
		t.Fatal(err)
	}
	lazy := Lazy(ctx)
	// A statement (SetRunPolicy) and a transaction (SaveSession), lazily.
	if err := s.SetRunPolicy(lazy, "r1", []byte(`{"allow":["Read"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSession(lazy, "r1", "sess-1", []byte("{\"type\":\"user\"}\n")); err != nil {
		t.Fatal(err)
	}
	if p, err := s.RunPolicy(ctx, "r1"); err != nil || string(p) != `{"allow":["Read"]}` {
		t.Errorf("policy after a lazy write = %s, %v", p, err)
	}
	if got, ok, err := s.Session(ctx, "r1", "sess-1"); err != nil || !ok || string(got) != "{\"type\":\"user\"}\n" {
		t.Errorf("session after a lazy write = %q, %v, %v", got, ok, err)
	}
	if s.Shared() {
		return // PostgreSQL ignores the mark
	}
	// Every connection of the pool (4 at most) is FULL (2).
	var conns []*sql.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 4 {
		c, err := s.db.DB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var level int
		if err := c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&level); err != nil {
			t.Fatal(err)
		}
		if level != 2 {
			t.Errorf("connection %d of the pool: synchronous = %d, want 2 (FULL)", len(conns), level)
		}
	}
}

// TestWakeStampChangesWithAPoke: the stamp a turn watches for a cancel
// changes when another process pokes and when this one cancels a run, not
// with this process's own pokes; on SQLite only.
func TestWakeStampChangesWithAPoke(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	before, ok := s.WakeStamp()
	if s.Shared() {
		if ok {
			t.Error("WakeStamp on PostgreSQL says it has a stamp")
		}
		return
	}
	if !ok {
		t.Fatal("WakeStamp on SQLite says it has none")
	}
	other := open(t, s.Dir()) // another process's store on the same state
	other.poke()
	after, _ := s.WakeStamp()
	if after == before {
		t.Errorf("stamp %q unchanged after another process's poke", after)
	}
	s.poke() // the file goes from the other's poke to this one's: a change once
	own, _ := s.WakeStamp()
	s.poke()
	if again, _ := s.WakeStamp(); again != own {
		t.Errorf("stamp %q changed to %q with this process's own poke", own, again)
	}
	if _, err := s.CreateRun(context.Background(), Run{ID: "r1", Prompt: "do it"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CancelRun(context.Background(), "r1", "stop"); err != nil {
		t.Fatal(err)
	}
	if cancelled, _ := s.WakeStamp(); cancelled == own {
		t.Errorf("stamp %q unchanged after this process cancelled a run", cancelled)
	}
}
