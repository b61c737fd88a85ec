package discord

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces/discord/discordtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// A Discord that holds a request unanswered fails it within the client's
// timeout and the surface reports itself unhealthy; once Discord answers
// again, the question is asked (posted once) and healthy again.
func TestHungDiscordMakesTheSurfaceUnhealthy(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil, func(c *Config) { c.HTTPClient = &http.Client{Timeout: 300 * time.Millisecond} })
	ctx := testCtx(t)
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Health(); err != nil {
		t.Fatalf("Health after connecting = %v, want nil", err)
	}
	release := srv.Hang(http.MethodPost, "/channels/"+discordtest.ChannelID+"/messages")
	defer release()
	set := surfacetest.SingleChoice("hung-discord")
	answers := surfacetest.NewAnswers()
	answers.Add(set)
	err := s.Ask(ctx, set, answers)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Ask while Discord holds the post = %v (ctx %v), want an error of its own", err, ctx.Err())
	}
	herr := s.Health()
	if herr == nil || !strings.Contains(herr.Error(), "did not answer") {
		t.Fatalf("Health while Discord holds the post = %v, want that Discord did not answer", herr)
	}
	if strings.Contains(herr.Error(), srv.Token()) {
		t.Fatalf("Health shows the token: %v", herr)
	}
	release()
	ch := make(chan error, 1)
	go func() { ch <- s.Ask(ctx, set, answers) }()
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	if _, err := srv.ClickButton(alice, m.ID, set.Questions[0].Options[0].Label); err != nil {
		t.Logf("click: %v", err)
	}
	if _, err := answers.WaitFinal(ctx, set.ID); err != nil {
		t.Fatalf("no answer once Discord answers again: %v", err)
	}
	if err := <-ch; err != nil {
		t.Errorf("Ask = %v", err)
	}
	if err := s.Health(); err != nil {
		t.Errorf("Health once Discord answers again = %v, want nil", err)
	}
}
