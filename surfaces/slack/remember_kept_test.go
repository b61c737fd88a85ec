package slack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/internal/stored"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// expiredOffers keeps every offer already expired.
type expiredOffers struct{ surfaces.RememberOffers }

func (e expiredOffers) KeepOffer(ctx context.Context, o surfaces.RememberOffer) error {
	o.ExpiresAt = time.Now().Add(-time.Minute)
	return e.RememberOffers.KeepOffer(ctx, o)
}

// answerAndOffer asks set on s for the store's run, has u choose SQLite,
// and returns the offer to remember that follows.
func answerAndOffer(ctx context.Context, t *testing.T, srv *slacktest.Server, s *Surface, st *stored.Store, set questions.Set, u slacktest.User) slacktest.Ephemeral {
	t.Helper()
	errs := make(chan error, 1)
	go func() { errs <- s.Ask(ctx, set, st.Answers(set.RunID)) }()
	m := setMessage(ctx, t, srv, set)
	q := set.Questions[0]
	act(ctx, t, srv, u, m, q, surfacetest.Choose(q, "SQLite"))
	if err := <-errs; err != nil {
		t.Fatalf("Ask: %v", err)
	}
	return waitEphemeral(ctx, t, srv, u, func(e slacktest.Ephemeral) bool {
		return strings.Contains(string(e.Blocks), rememberPrefix+set.ID)
	})
}

// TestRememberOfferSurvivesRestart: bob answers through a surface that
// keeps its offers in the store, which then stops; his click on the offer
// is refused by a process where he may no longer answer, then reaches a
// new process (a restart) and makes exactly one spec rule, his;
// his second click, reaching another instance, is told the offer was
// taken; the spec's next run is answered by the rule, not asked. An offer
// past its expiry is refused with a clear ephemeral reply.
func TestRememberOfferSurvivesRestart(t *testing.T) {
	t.Parallel()
	srv := slacktest.NewServer(t)
	srv.SetGroup("S0GROUP001", bob.ID)
	refs := &MemoryRefs{}
	st := stored.New(t)
	ctx := testCtx(t)
	withOffers := func(c *Config) { c.Offers = st.Offers() }
	set := st.Ask(t, "run-1", "nightly", surfacetest.SingleChoice("kept"))

	first := newSurface(t, srv, refs, withOffers)
	offer := answerAndOffer(ctx, t, srv, first, st, set, bob)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// A process where bob may no longer answer refuses his click.
	refusing := newSurface(t, srv, refs, withOffers, func(c *Config) { c.AllowGroups = nil })
	if err := refusing.Open(ctx); err != nil {
		t.Fatal(err)
	}
	clickEphemeral(ctx, t, srv, bob, offer.TS, rememberLabel)
	waitEphemeral(ctx, t, srv, bob, func(e slacktest.Ephemeral) bool { return e.Text == msgNotAllowed })
	if err := refusing.Close(); err != nil {
		t.Fatal(err)
	}
	if rules := st.Rules(t); len(rules) != 0 {
		t.Fatalf("rules = %+v after a refused click, want none", rules)
	}
	restarted := newSurface(t, srv, refs, withOffers)
	if err := restarted.Open(ctx); err != nil {
		t.Fatal(err)
	}
	clickEphemeral(ctx, t, srv, bob, offer.TS, rememberLabel)
	waitEphemeral(ctx, t, srv, bob, func(e slacktest.Ephemeral) bool { return strings.Contains(e.Text, "kept as rule") })
	other := newSurface(t, srv, refs, withOffers)
	if err := other.Open(ctx); err != nil {
		t.Fatal(err)
	}
	clickEphemeral(ctx, t, srv, bob, offer.TS, rememberLabel)
	waitEphemeral(ctx, t, srv, bob, func(e slacktest.Ephemeral) bool { return e.Text == msgRememberGone })
	rules := st.Rules(t)
	if len(rules) != 1 || rules[0].Scope != store.ScopeSpec || rules[0].ScopeValue != "nightly" || rules[0].MadeBy != "bob (slack "+bob.ID+")" ||
		rules[0].FromSet != set.ID || rules[0].Surface != name {
		t.Fatalf("rules = %+v, want one spec rule of bob's", rules)
	}
	if got := rules[0].ExpiresAt.Sub(rules[0].CreatedAt); got != 7*24*time.Hour {
		t.Errorf("rule lasts %s, want 7 days", got)
	}
	next := st.Ask(t, "run-2", "nightly", surfacetest.SingleChoice("kept-next"))
	if state := st.State(t, next.ID); state == store.SetPending {
		t.Errorf("the spec's next run asks again (%s), want it answered by rule %s", state, rules[0].ID)
	}

	// An expired offer.
	old := st.Ask(t, "run-3", "weekly", surfacetest.SingleChoice("kept-old"))
	late := newSurface(t, srv, refs, func(c *Config) { c.Offers = expiredOffers{st.Offers()} })
	offer = answerAndOffer(ctx, t, srv, late, st, old, alice)
	clickEphemeral(ctx, t, srv, alice, offer.TS, rememberLabel)
	waitEphemeral(ctx, t, srv, alice, func(e slacktest.Ephemeral) bool { return e.Text == msgRememberOld })
	if rules := st.Rules(t); len(rules) != 1 {
		t.Errorf("%d rules after an expired offer, want 1", len(rules))
	}
}
