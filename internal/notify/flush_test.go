package notify

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/retry"
)

// TestFlushOneAttemptThenServeSendsTheRest: a foreground command's Flush
// makes one attempt at each delivery its Notifier queued (not another
// process's); what the receiver refused is left (counted) in the outbox,
// and a later serve (a Notifier on the store opened again) sends it with
// the same delivery ID; what Flush delivered is never sent again.
func TestFlushOneAttemptThenServeSendsTheRest(t *testing.T) {
	t.Parallel()
	secret := []byte("test-notify-secret")
	u, got := receiver(t, secret, 500)
	dir := t.TempDir()
	st := openStore(t, dir)
	route := func(string) Route { return Route{Webhooks: []Webhook{{URL: u}}} }
	opts := Options{Outbox: st, Route: route, Secret: secret, Backoff: retry.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}}
	ctx := context.Background()
	// Another process's delivery, due: not this command's to send.
	other := New(opts)
	if err := other.Queue(ctx, Event{Kind: Failed, RunID: "r0"}); err != nil {
		t.Fatal(err)
	}
	n := New(opts)
	for _, ev := range []Event{{Kind: Failed, RunID: "r1"}, {Kind: Done, RunID: "r2"}} {
		if err := n.Emit(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if left, why := n.Flush(ctx); left != 1 || why == nil || !strings.Contains(why.Error(), "500") {
		t.Fatalf("Flush left %d (%v), want 1: the first answered 500", left, why)
	}
	refused, took := next(t, got), next(t, got)
	if refused.body.ID != "r1/failed" || took.body.ID != "r2/done" {
		t.Fatalf("Flush sent %s then %s; want r1/failed, r2/done", refused.body.ID, took.body.ID)
	}
	select {
	case r := <-got:
		t.Fatalf("Flush sent another process's delivery too: %+v", r)
	default:
	}
	if left, _ := n.Flush(ctx); left != 0 {
		t.Fatalf("a second Flush left %d: it has nothing queued", left)
	}
	// The next serve sends what is left, once each.
	serve := New(Options{Outbox: openStore(t, dir), Route: route, Secret: secret})
	deadline := time.Now().Add(wait)
	for {
		due, err := st.DueNotifications(ctx, time.Now().Add(time.Hour), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still due: %+v", due)
		}
		serve.DeliverDue(ctx)
		time.Sleep(5 * time.Millisecond) // the retry's backoff, polled
	}
	seen := map[string]string{}
	for range 2 {
		r := next(t, got)
		seen[r.body.ID] = r.delivery
	}
	if seen["r1/failed"] != refused.delivery || seen["r0/failed"] == "" {
		t.Fatalf("serve sent %v; want r1/failed as %s and r0/failed", seen, refused.delivery)
	}
	select {
	case r := <-got:
		t.Fatalf("a delivery sent twice: %+v", r)
	default:
	}
}

// TestFlushInterruptedSendsNothing: a command cut short (its context
// ended) sends nothing: every delivery it queued is counted left.
func TestFlushInterruptedSendsNothing(t *testing.T) {
	t.Parallel()
	secret := []byte("test-notify-secret")
	u, got := receiver(t, secret)
	st := openStore(t, t.TempDir())
	n := New(Options{Outbox: st, Secret: secret, Route: func(string) Route { return Route{Webhooks: []Webhook{{URL: u}}} }})
	if err := n.Emit(context.Background(), Event{Kind: Done, RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if left, why := n.Flush(ctx); left != 1 || why == nil {
		t.Fatalf("Flush left %d (%v), want 1", left, why)
	}
	if due, err := st.DueNotifications(context.Background(), time.Now(), 10); err != nil || len(due) != 1 {
		t.Fatalf("due = %+v, %v; want the delivery left for serve", due, err)
	}
	select {
	case r := <-got:
		t.Fatalf("sent: %+v", r)
	default:
	}
}
