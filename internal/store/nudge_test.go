package store

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
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
	// later nudges arrive (those sent while it was down are lost). The
	// store's one listening connection LISTENs on the wake channel too, so
	// its last statement is either LISTEN.
	u, _ := url.Parse(pgURL(t, dir))
	var killed int
	if err := a.db.QueryRowContext(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = ? AND query ILIKE 'LISTEN%'`, u.Query().Get("application_name")).Scan(&killed); err != nil {
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

// TestOneListenerForPokesAndNudges (PostgreSQL): a store waiting for an
// answer and listening for nudges holds one listening connection, not
// one each; when it is lost, the notifier connects again, the waiter is
// woken for an answer given meanwhile (its poke was lost), and nudges
// arrive again; a closed store listens no more. On SQLite there is no
// listening connection.
func TestOneListenerForPokesAndNudges(t *testing.T) {
	t.Parallel()
	if !onPostgres(t) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	s, other := open(t, dir), open(t, dir)
	s.pollEvery = time.Hour // only the notifier may wake the waiter
	lctx, stop := context.WithCancel(ctx)
	nudges, err := s.Nudges(lctx)
	if err != nil {
		t.Fatal(err)
	}
	set := newWaitingRun(t, s, "r1", "qa")
	got := make(chan error, 1)
	go func() {
		rec, err := s.WaitSet(ctx, set.ID)
		if err == nil && rec.State != SetAnswered {
			err = fmt.Errorf("state %s", rec.State)
		}
		got <- err
	}()
	// Both the poller and Nudges subscribe to the one notifier.
	n := s.d.(*pgDialect).notify
	for subscribed := 0; subscribed < 2; {
		n.mu.Lock()
		subscribed = len(n.subs)
		n.mu.Unlock()
		select {
		case <-ctx.Done():
			t.Fatalf("%d subscribers of the notifier, want 2", subscribed)
		case <-time.After(10 * time.Millisecond):
		}
	}
	u, _ := url.Parse(pgURL(t, dir))
	listening := `FROM pg_stat_activity WHERE application_name = ? AND query ILIKE 'LISTEN%'`
	var count int
	if err := other.db.QueryRowContext(ctx, `SELECT COUNT(*) `+listening, u.Query().Get("application_name")).Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 1 {
		t.Fatalf("%d listening connections, want 1", count)
	}
	if err := other.db.QueryRowContext(ctx, `SELECT COUNT(pg_terminate_backend(pid)) `+listening, u.Query().Get("application_name")).Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 1 {
		t.Fatalf("terminated %d listening connections, want 1", count)
	}
	if _, err := other.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "cli", Surface: "cli",
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	topic := "github:" + dir + "#after"
	for arrived := false; !arrived; {
		if err := other.Nudge(ctx, topic); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("no nudge arrived after the listening connection was lost")
		case n := <-nudges:
			arrived = n == topic
		case <-time.After(250 * time.Millisecond):
		}
	}
	stop()
	for range nudges {
	}

	// A closed store listens no more, and says so.
	closed := open(t, dir)
	closed.Close()
	if ch, err := closed.Nudges(ctx); ch != nil || err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Nudges on a closed store = %v, %v; want an error", ch, err)
	}
}
