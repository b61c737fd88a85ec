package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestRememberOfferOnceAcrossInstances: an offer to remember kept by one
// instance is found by another; taken by both at once it makes exactly one
// rule (the other is told it was taken); taken again it is refused; an
// expired offer and one never kept are refused with what they are.
func TestRememberOfferOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	rec := specRunAsking(t, a, "r1", "nightly", "/w1", upgradeSet("Upgrade to pgx v5?"))
	offer(t, a, rec, "1", "alice (discord 42)")
	o := RememberOffer{Surface: "discord", Key: "#k1", RunID: "r1", SetID: rec.Set.ID, User: "42", By: "alice (discord 42)",
		Remember: "spec:7d", ExpiresAt: time.Now().Add(24 * time.Hour)}
	if err := a.KeepRememberOffer(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := a.KeepRememberOffer(ctx, o); err != nil {
		t.Fatalf("keeping the same offer again: %v", err)
	}
	got, err := b.RememberOfferFor(ctx, "discord", "#k1")
	if err != nil || got.SetID != rec.Set.ID || got.User != "42" || got.By != o.By || got.Remember != "spec:7d" || !got.TakenAt.IsZero() {
		t.Fatalf("the other instance's offer = %+v, %v", got, err)
	}
	if _, err := b.RememberOfferFor(ctx, "slack", "#k1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another surface's offer: %v, want ErrNotFound", err)
	}

	req := RuleRequest{SetID: rec.Set.ID, Scope: ScopeSpec, Lifetime: 7 * 24 * time.Hour, By: o.By, Surface: "discord", Offer: &OfferRef{Surface: "discord", Key: "#k1"}}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	rules := make([]Rule, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			rules[i], errs[i] = s.Remember(ctx, req)
		}()
	}
	wg.Wait()
	var made []Rule
	for i, err := range errs {
		switch {
		case err == nil:
			made = append(made, rules[i])
		case !errors.Is(err, ErrOfferTaken):
			t.Errorf("take %d: %v, want ErrOfferTaken", i, err)
		}
	}
	if len(made) != 1 {
		t.Fatalf("%d rules made from one offer taken four times, want 1", len(made))
	}
	all, err := b.Rules(ctx, RuleFilter{})
	if err != nil || len(all) != 1 || all[0].ID != made[0].ID || all[0].ScopeValue != "nightly" {
		t.Fatalf("rules = %+v, %v; want only %s", all, err, made[0].ID)
	}
	if got, err := a.RememberOfferFor(ctx, "discord", "#k1"); err != nil || got.TakenAt.IsZero() || got.RuleID != made[0].ID {
		t.Errorf("taken offer = %+v, %v; want taken by %s", got, err, made[0].ID)
	}

	// Expired, never kept, and a refusal that leaves the offer open.
	old := o
	old.Key, old.ExpiresAt = "#old", time.Now().Add(-time.Minute)
	if err := a.KeepRememberOffer(ctx, old); err != nil {
		t.Fatal(err)
	}
	req.Offer = &OfferRef{Surface: "discord", Key: "#old"}
	if _, err := b.Remember(ctx, req); !errors.Is(err, ErrOfferExpired) {
		t.Errorf("an expired offer: %v, want ErrOfferExpired", err)
	}
	req.Offer = &OfferRef{Surface: "discord", Key: "#never"}
	if _, err := b.Remember(ctx, req); !errors.Is(err, ErrOfferTaken) {
		t.Errorf("an offer never kept: %v, want ErrOfferTaken", err)
	}
	open2 := o
	open2.Key = "#k2"
	if err := a.KeepRememberOffer(ctx, open2); err != nil {
		t.Fatal(err)
	}
	req.Offer, req.By = &OfferRef{Surface: "discord", Key: "#k2"}, "mallory"
	if _, err := b.Remember(ctx, req); err == nil || errors.Is(err, ErrOfferTaken) {
		t.Errorf("mallory kept alice's answer: %v", err)
	}
	if got, err := a.RememberOfferFor(ctx, "discord", "#k2"); err != nil || !got.TakenAt.IsZero() {
		t.Errorf("a refused take left the offer %+v, %v; want it open", got, err)
	}
	if err := a.KeepRememberOffer(ctx, RememberOffer{Surface: "discord", Key: "#x"}); err == nil {
		t.Error("kept an offer of no set")
	}
}
