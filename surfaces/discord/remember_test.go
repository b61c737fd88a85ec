package discord

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/discord/discordtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// rememberAnswers is surfacetest's Answers that can remember: it records
// the requests, and refuses with refuse when set.
type rememberAnswers struct {
	*surfacetest.Answers
	refuse error

	mu   sync.Mutex
	reqs []surfaces.RememberRequest
}

var _ surfaces.Rememberer = (*rememberAnswers)(nil)

func (r *rememberAnswers) Remember(_ context.Context, req surfaces.RememberRequest) (surfaces.Remembered, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	if r.refuse != nil {
		return surfaces.Remembered{}, r.refuse
	}
	return surfaces.Remembered{RuleID: "r3fa9c1d2", Text: "kept as rule r3fa9c1d2: SQLite for spec nightly until 2026-12-03"}, nil
}

func (r *rememberAnswers) requests() []surfaces.RememberRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]surfaces.RememberRequest(nil), r.reqs...)
}

// rememberOfferOf waits for the ephemeral offer that follows interaction
// id and returns it.
func rememberOfferOf(ctx context.Context, t *testing.T, srv *discordtest.Server, id string) discordtest.Followup {
	t.Helper()
	f, err := srv.WaitFollowup(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	walk(f.Components, func(c discordgo.MessageComponent) {
		if b, ok := c.(*discordgo.Button); ok {
			labels = append(labels, b.Label)
		}
	})
	if !f.Ephemeral || len(labels) != 1 || labels[0] != rememberLabel {
		t.Fatalf("follow-up = %+v (buttons %q), want an ephemeral offer with %q", f, labels, rememberLabel)
	}
	return f
}

// TestRememberOffer: bob's click answers the set; only he is offered, in an
// ephemeral follow-up, to remember it for the spec; the question's message
// shows the answer with every button disabled; alice cannot take his offer;
// his click makes a spec:7d rule with his name and tells him the rule; the
// offer is then gone.
func TestRememberOffer(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("remember")
	ra := &rememberAnswers{Answers: surfacetest.NewAnswers()}
	ra.Add(set)
	errs := make(chan error, 1)
	go func() { errs <- s.Ask(ctx, set, ra) }()
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	r, ok := interact(ctx, t, srv, "click SQLite", func() (string, error) { return srv.ClickButton(bob, m.ID, "SQLite") })
	if !ok || r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Fatalf("response = %+v, want a deferred update", r)
	}
	if err := <-errs; err != nil {
		t.Fatalf("Ask: %v", err)
	}
	waitAnswered(ctx, t, srv, m)
	f := rememberOfferOf(ctx, t, srv, r.InteractionID)
	if _, err := srv.ClickFollowup(alice, f.MessageID, rememberLabel); err == nil {
		t.Errorf("alice clicked bob's ephemeral offer")
	}
	if got := ra.requests(); len(got) != 0 {
		t.Fatalf("remembered before the click: %+v", got)
	}

	r2, ok := interact(ctx, t, srv, "click remember", func() (string, error) { return srv.ClickFollowup(bob, f.MessageID, rememberLabel) })
	if !ok || !r2.Ephemeral || r2.Data == nil || !strings.Contains(r2.Data.Content, "kept as rule r3fa9c1d2") {
		t.Fatalf("response = %+v, want the rule, ephemerally", r2)
	}
	want := surfaces.RememberRequest{SetID: set.ID, By: "bob (discord " + bob.ID + ")", Surface: name, Remember: "spec:7d"}
	if got := ra.requests(); len(got) != 1 || got[0] != want {
		t.Errorf("Remember requests = %+v, want %+v", got, want)
	}
	r3, ok := interact(ctx, t, srv, "click remember again", func() (string, error) { return srv.ClickFollowup(bob, f.MessageID, rememberLabel) })
	if !ok || !r3.Ephemeral || r3.Data == nil || r3.Data.Content != msgRememberGone {
		t.Errorf("second click's response = %+v, want %q", r3, msgRememberGone)
	}
	if got := ra.requests(); len(got) != 1 {
		t.Errorf("Remember called %d times, want once", len(got))
	}
}

// TestRememberRefused: the store's refusal is told to the person who
// clicked, ephemerally; Answers that cannot remember get no offer.
func TestRememberRefused(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("refused")
	ra := &rememberAnswers{Answers: surfacetest.NewAnswers(), refuse: errors.New("rules.max_lifetime is 3d")}
	ra.Add(set)
	errs := make(chan error, 1)
	go func() { errs <- s.Ask(ctx, set, ra) }()
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	r, ok := interact(ctx, t, srv, "click SQLite", func() (string, error) { return srv.ClickButton(alice, m.ID, "SQLite") })
	if !ok {
		t.Fatal("no response")
	}
	if err := <-errs; err != nil {
		t.Fatalf("Ask: %v", err)
	}
	f := rememberOfferOf(ctx, t, srv, r.InteractionID)
	r2, ok := interact(ctx, t, srv, "click remember", func() (string, error) { return srv.ClickFollowup(alice, f.MessageID, rememberLabel) })
	if !ok || !r2.Ephemeral || r2.Data == nil || r2.Data.Content != msgRememberNot+"rules.max\\_lifetime is 3d" && r2.Data.Content != msgRememberNot+"rules.max_lifetime is 3d" {
		t.Errorf("response = %+v, want the refusal", r2)
	}

	// Plain Answers: no offer.
	plain := surfacetest.SingleChoice("plain")
	ch := asking(ctx, s, plain)
	pm := questionMessage(ctx, t, srv, plain, plain.Questions[0])
	pr, ok := interact(ctx, t, srv, "click SQLite", func() (string, error) { return srv.ClickButton(alice, pm.ID, "SQLite") })
	if !ok {
		t.Fatal("no response")
	}
	result(ctx, t, ch)
	waitAnswered(ctx, t, srv, pm)
	if f := srv.Followups(pr.InteractionID); len(f) != 0 {
		t.Errorf("follow-ups = %+v, want no offer for Answers that cannot remember", f)
	}
}
