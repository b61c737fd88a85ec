package slack

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
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

// waitEphemeral waits for the first ephemeral message to u, after the
// first skip ones, that match accepts.
func waitEphemeral(ctx context.Context, t *testing.T, srv *slacktest.Server, u slacktest.User, match func(slacktest.Ephemeral) bool) slacktest.Ephemeral {
	t.Helper()
	var got slacktest.Ephemeral
	err := srv.WaitFor(ctx, func() bool {
		for _, e := range srv.Ephemerals() {
			if e.User == u.ID && match(e) {
				got = e
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no such ephemeral message to %s: %v (have %+v)", u.Name, err, srv.Ephemerals())
	}
	return got
}

// clickEphemeral clicks label on the ephemeral message ts as u, retrying
// while the click cannot be delivered.
func clickEphemeral(ctx context.Context, t *testing.T, srv *slacktest.Server, u slacktest.User, ts, label string) {
	t.Helper()
	for {
		_, err := srv.ClickEphemeral(u, ts, label)
		if err == nil {
			return
		}
		if err != slacktest.ErrNotConnected && err != slacktest.ErrNoAck || ctx.Err() != nil {
			t.Fatalf("%s clicking %q: %v", u.Name, label, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestRememberOffer: bob's answer closes the set; only he is offered, in an
// ephemeral message, to remember it for the spec; alice cannot see it; his
// click makes a spec:7d rule with his name and tells him the rule; the
// offer is then gone. A refusal of the store is told to him too.
func TestRememberOffer(t *testing.T) {
	t.Parallel()
	srv := slacktest.NewServer(t)
	srv.SetGroup("S0GROUP001", bob.ID)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	for _, refuse := range []error{nil, errors.New("rules.max_lifetime is 3d")} {
		set := surfacetest.SingleChoice("remember")
		if refuse != nil {
			set = surfacetest.SingleChoice("refused")
		}
		ra := &rememberAnswers{Answers: surfacetest.NewAnswers(), refuse: refuse}
		ra.Add(set)
		errs := make(chan error, 1)
		go func() { errs <- s.Ask(ctx, set, ra) }()
		m := setMessage(ctx, t, srv, set)
		q := set.Questions[0]
		act(ctx, t, srv, bob, m, q, surfacetest.Choose(q, "SQLite"))
		if err := <-errs; err != nil {
			t.Fatalf("Ask: %v", err)
		}
		offer := waitEphemeral(ctx, t, srv, bob, func(e slacktest.Ephemeral) bool {
			return strings.Contains(string(e.Blocks), rememberPrefix+set.ID)
		})
		if !strings.Contains(texts(offer.Blocks), rememberLabel) {
			t.Fatalf("offer = %s, want a %q button", offer.Blocks, rememberLabel)
		}
		if _, err := srv.ClickEphemeral(alice, offer.TS, rememberLabel); err == nil {
			t.Errorf("alice clicked bob's ephemeral offer")
		}
		if got := ra.requests(); len(got) != 0 {
			t.Fatalf("remembered before the click: %+v", got)
		}
		clickEphemeral(ctx, t, srv, bob, offer.TS, rememberLabel)
		if refuse == nil {
			waitEphemeral(ctx, t, srv, bob, func(e slacktest.Ephemeral) bool { return strings.Contains(e.Text, "kept as rule r3fa9c1d2") })
		} else {
			waitEphemeral(ctx, t, srv, bob, func(e slacktest.Ephemeral) bool {
				return strings.HasPrefix(e.Text, msgRememberNot) && strings.Contains(e.Text, "max_lifetime is 3d")
			})
		}
		want := surfaces.RememberRequest{SetID: set.ID, By: "bob (slack " + bob.ID + ")", Surface: name, Remember: "spec:7d"}
		if got := ra.requests(); len(got) != 1 || got[0] != want {
			t.Errorf("Remember requests = %+v, want %+v", got, want)
		}
		if refuse == nil {
			clickEphemeral(ctx, t, srv, bob, offer.TS, rememberLabel)
			waitEphemeral(ctx, t, srv, bob, func(e slacktest.Ephemeral) bool { return e.Text == msgRememberGone })
			if got := ra.requests(); len(got) != 1 {
				t.Errorf("Remember called %d times, want once", len(got))
			}
		}
	}
}
