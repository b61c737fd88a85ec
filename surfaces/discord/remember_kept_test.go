package discord

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/internal/stored"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/discord/discordtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// expiredOffers keeps every offer already expired.
type expiredOffers struct{ surfaces.RememberOffers }

func (e expiredOffers) KeepOffer(ctx context.Context, o surfaces.RememberOffer) error {
	o.ExpiresAt = time.Now().Add(-time.Minute)
	return e.RememberOffers.KeepOffer(ctx, o)
}

// answerAndOffer asks set on s for the store's run, has u click SQLite,
// and returns the offer to remember that follows.
func answerAndOffer(ctx context.Context, t *testing.T, srv *discordtest.Server, s *Surface, st *stored.Store, set questions.Set, u discordtest.User) discordtest.Followup {
	t.Helper()
	errs := make(chan error, 1)
	go func() { errs <- s.Ask(ctx, set, st.Answers(set.RunID)) }()
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	r, ok := interact(ctx, t, srv, "click SQLite", func() (string, error) { return srv.ClickButton(u, m.ID, "SQLite") })
	if !ok || r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Fatalf("response = %+v, want a deferred update", r)
	}
	if err := <-errs; err != nil {
		t.Fatalf("Ask: %v", err)
	}
	return rememberOfferOf(ctx, t, srv, r.InteractionID)
}

// TestRememberOfferSurvivesRestart: bob answers through a surface that
// keeps its offers in the store, which then stops; his click on the offer
// is refused by a process where he may no longer answer, then reaches two
// new processes (a restart and another instance of the
// cluster) and makes exactly one spec rule, his; a second click is told the
// offer was taken; the spec's next run is answered by the rule, not asked.
// An offer past its expiry is refused with a clear ephemeral reply.
func TestRememberOfferSurvivesRestart(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	refs := &MemoryRefs{}
	st := stored.New(t)
	ctx := testCtx(t)
	withOffers := func(c *Config) { c.Offers = st.Offers() }
	set := st.Ask(t, "run-1", "nightly", surfacetest.SingleChoice("kept"))

	first := newSurface(t, srv, refs, withOffers)
	f := answerAndOffer(ctx, t, srv, first, st, set, bob)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// A process where bob may no longer answer refuses his click.
	refusing := newSurface(t, srv, refs, withOffers, func(c *Config) { c.AllowRoles = nil })
	if err := refusing.Open(ctx); err != nil {
		t.Fatal(err)
	}
	r, ok := interact(ctx, t, srv, "click remember", func() (string, error) { return srv.ClickFollowup(bob, f.MessageID, rememberLabel) })
	if !ok || !r.Ephemeral || r.Data == nil || r.Data.Content != msgNotAllowed {
		t.Fatalf("response of a process where bob may not answer = %+v, want %q", r, msgNotAllowed)
	}
	if err := refusing.Close(); err != nil {
		t.Fatal(err)
	}
	if rules := st.Rules(t); len(rules) != 0 {
		t.Fatalf("rules = %+v after a refused click, want none", rules)
	}
	for range 2 {
		s := newSurface(t, srv, refs, withOffers)
		if err := s.Open(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r, ok = interact(ctx, t, srv, "click remember", func() (string, error) { return srv.ClickFollowup(bob, f.MessageID, rememberLabel) })
	if !ok || !r.Ephemeral || r.Data == nil || !strings.Contains(r.Data.Content, "kept as rule") && r.Data.Content != msgRememberGone {
		t.Fatalf("response = %+v, want the rule (or, from the instance that lost, that it was taken)", r)
	}
	r, ok = interact(ctx, t, srv, "click remember again", func() (string, error) { return srv.ClickFollowup(bob, f.MessageID, rememberLabel) })
	if !ok || !r.Ephemeral || r.Data == nil || r.Data.Content != msgRememberGone {
		t.Errorf("second click's response = %+v, want %q", r, msgRememberGone)
	}
	rules := st.Rules(t)
	if len(rules) != 1 || rules[0].Scope != store.ScopeSpec || rules[0].ScopeValue != "nightly" || rules[0].MadeBy != "bob (discord "+bob.ID+")" ||
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
	f = answerAndOffer(ctx, t, srv, late, st, old, alice)
	r, ok = interact(ctx, t, srv, "click an expired offer", func() (string, error) { return srv.ClickFollowup(alice, f.MessageID, rememberLabel) })
	if !ok || !r.Ephemeral || r.Data == nil || r.Data.Content != msgRememberOld {
		t.Errorf("expired offer's response = %+v, want %q", r, msgRememberOld)
	}
	if rules := st.Rules(t); len(rules) != 1 {
		t.Errorf("%d rules after an expired offer, want 1", len(rules))
	}
}
