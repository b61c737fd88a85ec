package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/retry"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

const wait = 60 * time.Second

type received struct {
	delivery, event string
	body            Payload
	verr            error
}

// receiver is a webhook endpoint on 127.0.0.1 that verifies each delivery
// and answers the status codes of codes in turn (then 200).
func receiver(t *testing.T, secret []byte, codes ...int) (string, <-chan received) {
	t.Helper()
	ch := make(chan received, 100)
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec := received{delivery: r.Header.Get(HeaderDelivery), event: r.Header.Get(HeaderEvent)}
		rec.verr = Verify(secret, r.Header.Get(HeaderSignature), r.Header.Get(HeaderTimestamp), b, time.Now(), 5*time.Minute)
		if err := json.Unmarshal(b, &rec.body); err != nil && rec.verr == nil {
			rec.verr = err
		}
		mu.Lock()
		code := http.StatusOK
		if len(codes) > 0 {
			code, codes = codes[0], codes[1:]
		}
		mu.Unlock()
		w.WriteHeader(code)
		ch <- rec
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ch
}

func next(t *testing.T, ch <-chan received) received {
	t.Helper()
	select {
	case r := <-ch:
		if r.verr != nil {
			t.Fatalf("delivery %s does not verify: %v", r.delivery, r.verr)
		}
		return r
	case <-time.After(wait):
		t.Fatal("no delivery")
	}
	return received{}
}

func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestWebhookRetriesUntil200: a signed event is retried through 500s, with
// one delivery ID, until the receiver takes it; emitting it again queues
// nothing; a restart (a new Notifier, the store opened again) goes on
// retrying what the previous one left.
func TestWebhookRetriesUntil200(t *testing.T) {
	t.Parallel()
	secret := []byte("test-notify-secret")
	u, got := receiver(t, secret, 500, 500, 503)
	dir := t.TempDir()
	st := openStore(t, dir)
	route := func(string) Route { return Route{Webhooks: []Webhook{{URL: u, Events: []string{Failed}}}} }
	n := New(Options{Outbox: st, Route: route, Secret: secret, Every: 20 * time.Millisecond,
		Backoff: retry.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}})
	ctx := context.Background()
	ev := Event{Kind: Failed, Spec: "nightly", RunID: "r1", Status: "failed", Error: "the model stopped", CostUSD: 0.25}
	if err := n.Emit(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if err := n.Emit(ctx, ev); err != nil { // again: queued once
		t.Fatal(err)
	}
	if err := n.Emit(ctx, Event{Kind: Done, Spec: "nightly", RunID: "r0"}); err != nil { // not routed
		t.Fatal(err)
	}
	// The first attempt, by a notifier that stops right after.
	n.DeliverDue(ctx)
	first := next(t, got)
	if first.event != Failed || first.body.Kind != Failed || first.body.RunID != "r1" || first.body.Error != "the model stopped" ||
		first.body.Show != "orchestrator show r1" || first.body.Version != Version || first.body.CostUSD != 0.25 {
		t.Fatalf("first delivery = %+v", first)
	}
	// A restart: another notifier on the store opened again.
	n2 := New(Options{Outbox: openStore(t, dir), Route: route, Secret: secret, Every: 20 * time.Millisecond,
		Backoff: retry.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); n2.Run(rctx) }()
	defer func() { cancel(); <-done }()
	for i := 0; i < 3; i++ { // 500, 503, then 200
		r := next(t, got)
		if r.delivery != first.delivery || r.body.ID != "r1/failed" {
			t.Fatalf("retry %d: delivery %s (want %s), event id %s", i, r.delivery, first.delivery, r.body.ID)
		}
	}
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
		time.Sleep(10 * time.Millisecond) // polling the store's state, not synchronizing
	}
	select {
	case r := <-got:
		t.Fatalf("a delivery after the 200: %+v", r)
	default:
	}
}

func TestSignAndVerify(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret-value")
	ts := time.Unix(1_800_000_000, 0)
	body := []byte(`{"kind":"done"}`)
	sig := Sign(secret, ts, body)
	if err := Verify(secret, sig, "1800000000", body, ts.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		secret, body []byte
		ts           string
		now          time.Time
	}{
		"other secret": {[]byte("other"), body, "1800000000", ts},
		"other body":   {secret, []byte(`{"kind":"failed"}`), "1800000000", ts},
		"replayed":     {secret, body, "1800000000", ts.Add(time.Hour)},
		"bad ts":       {secret, body, "soon", ts},
	} {
		if err := Verify(tc.secret, sig, tc.ts, tc.body, tc.now, 5*time.Minute); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

// TestKindsAreTheConfigurationsEvents: the configuration checks routes
// against the same list of events.
func TestKindsAreTheConfigurationsEvents(t *testing.T) {
	t.Parallel()
	if !slices.Equal(Kinds, config.NotifyEvents) {
		t.Fatalf("notify.Kinds %v, config.NotifyEvents %v", Kinds, config.NotifyEvents)
	}
}
