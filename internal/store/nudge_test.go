package store

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestNudgeReachesEveryInstance: on PostgreSQL a nudge from one store
// reaches another store's Nudges with its topic, and again after the
// listening connection was lost; a topic too long for NOTIFY is refused.
// On SQLite (one `serve` per state directory) Nudge does nothing and
// Nudges has no channel.
func TestNudgeReachesEveryInstance(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	if !onPostgres(t) {
		if err := a.Nudge(ctx, "github:acme/app#1"); err != nil {
			t.Fatalf("Nudge on SQLite: %v", err)
		}
		if ch, err := b.Nudges(ctx); ch != nil || err != nil {
			t.Fatalf("Nudges on SQLite = %v, %v; want nil, nil", ch, err)
		}
		return
	}
	lctx, stop := context.WithCancel(ctx)
	nudges, err := b.Nudges(lctx)
	if err != nil {
		t.Fatal(err)
	}
	// NOTIFY is the database's, not the schema's: other tests' nudges may
	// come too, so each topic here names its test directory.
	topic := func(n string) string { return "github:" + dir + "#" + n }
	receive := func(want string, within time.Duration) bool {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case got, ok := <-nudges:
				if !ok {
					t.Fatal("Nudges closed")
				}
				if got == want {
					return true
				}
			case <-deadline:
				return false
			}
		}
	}
	if err := a.Nudge(ctx, topic("1")); err != nil {
		t.Fatal(err)
	}
	if !receive(topic("1"), 10*time.Second) {
		t.Fatal("the nudge did not reach the other store")
	}

	if err := a.Nudge(ctx, strings.Repeat("x", MaxNudgeTopic+1)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("Nudge of a too long topic: %v", err)
	}

	// The listening connection is lost: the listener connects again, and
	// later nudges arrive (those sent while it was down are lost).
	u, _ := url.Parse(pgURL(t, dir))
	var killed int
	if err := a.db.QueryRowContext(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = ? AND query = ?`, u.Query().Get("application_name"), "LISTEN "+pgNudgeChannel).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("terminated %d nudge listeners, want 1", killed)
	}
	for i := 0; ; i++ {
		if i == 40 {
			t.Fatal("no nudge arrived after the listener's connection was lost")
		}
		if err := a.Nudge(ctx, topic("2")); err != nil {
			t.Fatal(err)
		}
		if receive(topic("2"), 250*time.Millisecond) {
			break
		}
	}

	stop()
	for range nudges {
	}
}
