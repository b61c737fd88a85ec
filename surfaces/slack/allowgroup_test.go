package slack

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// TestAllowGroupCheckFails: when the members of an allow_groups group
// cannot be listed (usergroups.users.list answers ok false with an error
// code, or 429 with a Retry-After longer than anyone waits for a click),
// bob, who clicked, is told privately that his permission could not be
// checked, without the error; the log has it; nothing is offered. His
// click again, once the call works, answers.
func TestAllowGroupCheckFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, logged string
		fail         func(srv *slacktest.Server)
	}{
		{"error", "missing_scope", func(srv *slacktest.Server) { srv.Fail("usergroups.users.list", "missing_scope", 1) }},
		{"rate limited", "rate limited", func(srv *slacktest.Server) {
			srv.RateLimitFor("usergroups.users.list", 1, time.Hour)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := slacktest.NewServer(t)
			srv.SetGroup("S0GROUP001", bob.ID)
			var logs logBuffer
			s := newSurface(t, srv, nil, func(c *Config) {
				c.Logger = slog.New(slog.NewTextHandler(logTo(&logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
			})
			ctx := testCtx(t)
			set := surfacetest.SingleChoice("group-check-" + strings.ReplaceAll(tc.name, " ", "-"))
			answers := surfacetest.NewAnswers()
			answers.Add(set)
			errs := make(chan error, 1)
			go func() { errs <- s.Ask(ctx, set, answers) }()
			m := setMessage(ctx, t, srv, set)
			q := set.Questions[0]

			tc.fail(srv)
			act(ctx, t, srv, bob, m, q, questions.Answer{Labels: []string{"SQLite"}})
			e := waitEphemeral(ctx, t, srv, bob, func(e slacktest.Ephemeral) bool { return e.Text == msgNotChecked })
			if strings.Contains(e.Text, tc.logged) || strings.Contains(e.Text, "xox") {
				t.Errorf("bob was told %q, want no error text", e.Text)
			}
			if got := answers.Offers(set.ID); len(got) != 0 {
				t.Errorf("offered %+v, want nothing while bob's permission is unknown", got)
			}
			if out := logs.String(); !strings.Contains(out, "check who may answer") || !strings.Contains(out, tc.logged) {
				t.Errorf("log = %s, want the failed check logged with %q", out, tc.logged)
			}

			act(ctx, t, srv, bob, m, q, questions.Answer{Labels: []string{"SQLite"}})
			resp, err := answers.WaitFinal(ctx, set.ID)
			if err != nil || !strings.Contains(resp.By, "bob") {
				t.Errorf("final = %+v, %v; want bob's answer", resp, err)
			}
			if err := <-errs; err != nil {
				t.Errorf("Ask: %v", err)
			}
			if out := logs.String(); strings.Contains(out, srv.BotToken()) || strings.Contains(out, "xoxb-") {
				t.Errorf("a Slack token reached the log:\n%s", out)
			}
		})
	}
}
