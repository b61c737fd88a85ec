package discord

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/discord/discordtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// TestAllRunsButton: a question that also waits in other runs says so and
// has "All N runs" buttons; bob's click answers it here and in the other
// run this surface shows (its message shows the answer), not in the run it
// does not show.
func TestAllRunsButton(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	a, b, c := surfacetest.SingleChoice("group-a"), surfacetest.SingleChoice("group-b"), surfacetest.SingleChoice("group-c")
	ga := surfacetest.NewGroupAnswers(map[string][]questions.GroupRun{
		a.ID: {{SetID: b.ID, RunID: b.RunID, Spec: "nightly-b"}, {SetID: c.ID, RunID: c.RunID, Spec: "nightly-c"}},
		b.ID: {{SetID: a.ID, RunID: a.RunID, Spec: "nightly-a"}, {SetID: c.ID, RunID: c.RunID, Spec: "nightly-c"}},
	}, a, b, c)
	errs := make(chan error, 2)
	for _, set := range []questions.Set{a, b} {
		go func() { errs <- s.Ask(ctx, set, ga) }()
	}
	ma := questionMessage(ctx, t, srv, a, a.Questions[0])
	mb := questionMessage(ctx, t, srv, b, b.Questions[0])
	var labels []string
	walk(ma.Components, func(c discordgo.MessageComponent) {
		if b, ok := c.(*discordgo.Button); ok {
			labels = append(labels, b.Label)
		}
	})
	q := a.Questions[0]
	all := "All 3 runs: " + optionLabel(q.Options[1], 1, maxButtonLabel-len("All 3 runs: "))
	if !slices.Contains(labels, all) {
		t.Fatalf("buttons = %q, want %q among them", labels, all)
	}
	var fields []string
	for _, f := range ma.Embeds[0].Fields {
		fields = append(fields, f.Name+": "+f.Value)
	}
	if !strings.Contains(strings.Join(fields, "\n"), "also waits in 2 other runs: nightly-b") {
		t.Errorf("embed fields = %q, want the other runs named", fields)
	}
	r, ok := interact(ctx, t, srv, "click "+all, func() (string, error) { return srv.ClickButton(bob, ma.ID, all) })
	if !ok || r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Fatalf("response = %+v, want a deferred update", r)
	}
	for _, set := range []questions.Set{a, b} {
		resp, err := ga.WaitFinal(ctx, set.ID)
		if err != nil || len(resp.Answers) != 1 || resp.Answers[0].Labels[0] != q.Options[1].Label || !strings.Contains(resp.By, "bob") {
			t.Errorf("set %s: %+v, %v; want bob's %s", set.ID, resp, err, q.Options[1].Label)
		}
	}
	if others := ga.Others(); !slices.Equal(others, []string{b.ID}) {
		t.Errorf("offered to the group %q, want only %s (c is not shown here)", others, b.ID)
	}
	if _, ok := ga.Final(c.ID); ok {
		t.Errorf("set %s, not shown here, was answered", c.ID)
	}
	got := waitAnswered(ctx, t, srv, mb)
	if !strings.Contains(got.Content, "bob") {
		t.Errorf("the other run's message = %q, want it answered by bob", got.Content)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("Ask: %v", err)
		}
	}
}

// keyRefs is MemoryRefs that says when key is set.
type keyRefs struct {
	MemoryRefs
	key  string
	set  chan struct{}
	once sync.Once
}

func (r *keyRefs) SetRef(ctx context.Context, key, value string) error {
	err := r.MemoryRefs.SetRef(ctx, key, value)
	if key == r.key {
		r.once.Do(func() { close(r.set) })
	}
	return err
}

// TestAllRunsWhilePosting: b's message is on Discord but its post not
// answered yet when bob's "All 2 runs" click on a's message answers b too
// (the answer is recorded before the post returns): b's message ends
// showing the answer, edited once.
func TestAllRunsWhilePosting(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	a, b := surfacetest.SingleChoice("posting-a"), surfacetest.SingleChoice("posting-b")
	s := newSurface(t, srv, nil)
	refs := &keyRefs{key: s.answerKey(b.ID, b.Questions[0].ID), set: make(chan struct{})}
	s.refs = refs
	ctx := testCtx(t)
	ga := surfacetest.NewGroupAnswers(map[string][]questions.GroupRun{
		a.ID: {{SetID: b.ID, RunID: b.RunID, Spec: "nightly-b"}},
		b.ID: {{SetID: a.ID, RunID: a.RunID, Spec: "nightly-a"}},
	}, a, b)
	errs := make(chan error, 2)
	go func() { errs <- s.Ask(ctx, a, ga) }()
	ma := questionMessage(ctx, t, srv, a, a.Questions[0])
	release := srv.HoldResponse("POST", "/channels/"+discordtest.ChannelID+"/messages")
	defer release()
	go func() { errs <- s.Ask(ctx, b, ga) }()
	mb := questionMessage(ctx, t, srv, b, b.Questions[0]) // posted, its post not answered

	q := a.Questions[0]
	all := "All 2 runs: " + optionLabel(q.Options[1], 1, maxButtonLabel-len("All 2 runs: "))
	r, ok := interact(ctx, t, srv, "click "+all, func() (string, error) { return srv.ClickButton(bob, ma.ID, all) })
	if !ok || r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Fatalf("response = %+v, want a deferred update", r)
	}
	if resp, err := ga.WaitFinal(ctx, b.ID); err != nil || !strings.Contains(resp.By, "bob") {
		t.Fatalf("set %s: %+v, %v; want bob's answer", b.ID, resp, err)
	}
	select {
	case <-refs.set: // b's answer is remembered: its edit found no message
	case <-ctx.Done():
		t.Fatalf("b's answer was never remembered")
	}
	release()
	got := waitAnswered(ctx, t, srv, mb)
	if !strings.Contains(got.Content, "bob") {
		t.Errorf("b's message = %q, want it answered by bob", got.Content)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("Ask: %v", err)
		}
	}
	if n := srv.CountRequests("PATCH", "/channels/"+discordtest.ChannelID+"/messages/"+mb.ID); n != 1 {
		t.Errorf("b's message was edited %d times, want once", n)
	}
}

// TestResolveWhilePosting: a set answered elsewhere while its message is
// on Discord but its post not answered yet (Resolve finds no message to
// edit) ends showing that answer, its message edited once.
func TestResolveWhilePosting(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("resolve-posting")
	release := srv.HoldResponse("POST", "/channels/"+discordtest.ChannelID+"/messages")
	defer release()
	askCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := asking(askCtx, s, set)
	m := questionMessage(ctx, t, srv, set, set.Questions[0]) // posted, its post not answered

	resp := questions.Response{SetID: set.ID, By: "@octocat", Surface: "github", At: time.Now(),
		Answers: []questions.Answer{surfacetest.Choose(set.Questions[0], "MySQL")}}
	if err := s.Resolve(ctx, set, resp); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	release()
	got, err := srv.WaitMessage(ctx, m.ChannelID, func(x *discordgo.Message) bool {
		return x.ID == m.ID && disabled(x) && strings.Contains(x.Content, "on github by **\\@octocat**")
	})
	if err != nil {
		t.Fatalf("message %s never showed the answer given elsewhere: %v", m.ID, err)
	}
	cancel()
	<-ch
	if n := srv.CountRequests("PATCH", "/channels/"+discordtest.ChannelID+"/messages/"+m.ID); n != 1 {
		t.Errorf("the message was edited %d times, want once (%q)", n, got.Content)
	}
}
