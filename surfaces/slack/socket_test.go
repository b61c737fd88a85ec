package slack

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// TestSeveralConnections: two processes of the same app are connected;
// Slack hands the click to the one that does not watch the set, which
// decides it through the store (Lookup). The answer is taken once and the
// message edited once. Then Slack disables the link (link_disabled) and
// drops the connections: the surfaces reconnect and a click still goes
// through.
func TestSeveralConnections(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := slacktest.NewServer(t)
	refs := &MemoryRefs{}
	answers := surfacetest.NewAnswers()
	set := surfacetest.SingleChoice("several")
	answers.Add(set)
	set2 := surfacetest.SingleChoice("several-2")
	answers.Add(set2)
	lookup := func(_ context.Context, id string) (questions.Set, surfaces.Answers, bool, error) {
		for _, s := range []questions.Set{set, set2} {
			if s.ID == id {
				_, done := answers.Final(id)
				return s, answers, !done, nil
			}
		}
		return questions.Set{}, nil, false, nil
	}
	a := newSurface(t, srv, refs, func(c *Config) { c.Lookup = lookup })
	if err := a.Watch(ctx, set, answers); err != nil {
		t.Fatal(err)
	}
	b := newSurface(t, srv, refs, func(c *Config) { c.Lookup = lookup })
	if err := b.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitConnected(ctx, 2); err != nil {
		t.Fatal(err)
	}
	m := setMessage(ctx, t, srv, set)
	q := set.Questions[0]
	act(ctx, t, srv, alice, m, q, surfacetest.Choose(q, "MySQL"))
	resp, err := answers.WaitFinal(ctx, set.ID)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Surface != name || resp.By != "alice (slack "+alice.ID+")" {
		t.Errorf("final = %+v", resp)
	}
	if err := srv.WaitFor(ctx, func() bool { m, _ := srv.Message(m.TS); return m.Updates >= 1 }); err != nil {
		t.Fatal(err)
	}
	if n := len(answers.Offers(set.ID)); n != 1 {
		t.Errorf("%d offers, want 1", n)
	}

	// Slack disables the link, then every connection drops.
	if err := a.Watch(ctx, set2, answers); err != nil {
		t.Fatal(err)
	}
	g := srv.Generation()
	srv.Disconnect("link_disabled")
	if err := srv.WaitFor(ctx, func() bool { return srv.Renewed(g) && srv.Connections() == 2 }); err != nil {
		t.Fatalf("the surfaces did not reconnect: %v", err)
	}
	srv.Drop()
	m2 := setMessage(ctx, t, srv, set2)
	act(ctx, t, srv, alice, m2, set2.Questions[0], surfacetest.Choose(set2.Questions[0], "Postgres"))
	if _, err := answers.WaitFinal(ctx, set2.ID); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(m.TS); m.Updates != 1 {
		t.Errorf("the first message was edited %d times, want once", m.Updates)
	}
	if a.Health() != nil || b.Health() != nil {
		t.Logf("health after reconnecting: %v, %v", a.Health(), b.Health())
	}
}

// TestAckWithinThreeSeconds: an envelope is acknowledged even when the
// work behind it is slow (the store takes long to decide).
func TestAckWithinThreeSeconds(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := slacktest.NewServer(t)
	s := newSurface(t, srv, &MemoryRefs{})
	set := surfacetest.SingleChoice("slow")
	release := make(chan struct{})
	slow := slowAnswers{release: release, a: surfacetest.NewAnswers()}
	slow.a.Add(set)
	if err := s.Watch(ctx, set, slow); err != nil {
		t.Fatal(err)
	}
	m := setMessage(ctx, t, srv, set)
	// The store holds the decision until the acknowledgement was received.
	for {
		_, err := srv.ClickButton(alice, m.TS, "MySQL")
		if err == nil {
			break
		}
		if !errors.Is(err, slacktest.ErrNotConnected) || ctx.Err() != nil {
			t.Fatalf("click: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(release)
	if _, err := slow.a.WaitFinal(ctx, set.ID); err != nil {
		t.Fatal(err)
	}
}

type slowAnswers struct {
	release chan struct{}
	a       *surfacetest.Answers
}

func (s slowAnswers) Offer(ctx context.Context, resp questions.Response) (surfaces.Decision, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
		return surfaces.Decision{}, ctx.Err()
	}
	return s.a.Offer(ctx, resp)
}
