package github

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// webhookAnswerHeld asks a question on a surface taking webhooks, has
// alice answer it, and delivers the comment's webhook with its 👀 held in
// flight by the fake; it returns the surface, the answer's ID, the path
// of its reactions and the hold's release.
func webhookAnswerHeld(t *testing.T, f *fixture) (*Surface, int64, string, func()) {
	t.Helper()
	const secret = "s3cret"
	cfg := f.config(1)
	cfg.PollInterval = time.Hour // only the webhook brings the answer
	cfg.WebhookSecret = secret
	s := f.surface(t, cfg)
	set := surfacetest.SingleChoice("closing")
	startAsk(ctxTimeout(t), s, set)
	f.waitAsked(t, set)
	waitWaiting(t, s)
	answer := f.srv.AddComment(testRepo, 1, "alice", "3")
	reactions := fmt.Sprintf("/repos/%s/issues/comments/%d/reactions", testRepo, answer)
	release := f.srv.Hang(http.MethodPost, reactions)
	t.Cleanup(release)
	payload := f.srv.IssueCommentEvent(testRepo, answer, "created")
	if code := deliver(t, s.c, secret, "issue_comment", "d-closing", payload); code != http.StatusAccepted {
		t.Fatalf("delivery: status %d, want 202", code)
	}
	f.srv.WaitFor(t, waitLong, "the 👀 in flight", func() bool { return f.srv.Holding(http.MethodPost, reactions) == 1 })
	return s, answer, reactions, release
}

// TestWebhookCloseLetsAcceptedReactionLand: Close while the 👀 on an
// answer the store took is in flight does not cancel it: it lands, once,
// and Close returns after it.
func TestWebhookCloseLetsAcceptedReactionLand(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s, answer, reactions, release := webhookAnswerHeld(t, f)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	eventually(t, "Close to stop the client", func() bool { return s.c.ctx.Err() != nil })
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v with the 👀 still in flight", err)
	default:
	}
	if n := f.srv.Holding(http.MethodPost, reactions); n != 1 {
		t.Fatalf("Close ended the 👀 in flight (%d held)", n)
	}
	release()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(waitLong):
		t.Fatal("Close did not return after the 👀 landed")
	}
	if got := f.srv.Reactions(testRepo, answer); !slices.Equal(got, []string{"eyes"}) {
		t.Fatalf("reactions %v, want one eyes", got)
	}
}

// TestCloseGraceEndsAHeldReaction: a 👀 held past the grace is cancelled:
// Close returns (here with a grace of a millisecond) and nothing lands.
func TestCloseGraceEndsAHeldReaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s, answer, reactions, release := webhookAnswerHeld(t, f)
	s.c.closeGrace = time.Millisecond
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	f.srv.WaitFor(t, waitLong, "the held 👀 given up", func() bool { return f.srv.Holding(http.MethodPost, reactions) == 0 })
	release()
	if got := f.srv.Reactions(testRepo, answer); len(got) != 0 {
		t.Fatalf("reactions %v after the grace, want none", got)
	}
}
