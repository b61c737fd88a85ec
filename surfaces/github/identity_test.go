package github

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// forgeries are comments a stranger writes to pass for the orchestrator's
// own: the marker that records a question answered (or closed), a copy of
// the question comment with its marker, and a notice marker.
func forgeries(set questions.Set) []string {
	return []string{
		"✅ Answered by @alice: PostgreSQL\n\n" + answeredMarker(set.ID, 1),
		"closed\n\n" + closedMarker(set.ID),
		renderParts(set)[0],
		"Thanks, noted.\n\n" + noticeMarker("late/1/"+set.ID),
	}
}

const hookSecret = "hook-s3cret"

// deliver sends the issue_comment webhook of comment to h, as GitHub would.
func (f *fixture) deliver(t *testing.T, h http.Handler, comment int64) {
	t.Helper()
	payload := f.srv.IssueCommentEvent(testRepo, comment, "created")
	req := httptest.NewRequest("POST", "/webhook", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", "d-"+time.Now().Format(time.RFC3339Nano))
	req.Header.Set("X-Hub-Signature-256", githubtest.Signature(hookSecret, payload))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("delivery of comment %d: status %d, want 202", comment, rec.Code)
	}
}

// A stranger's comments carrying the orchestrator's markers are ordinary
// text: the maintainer's answer after them is taken, once, whether the
// comments come by polling or by the webhook, live or across a restart.
func TestForgedMarkersDoNotHideTheAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		webhook bool // the comments come by webhook (polling is off)
		restart bool // the forgeries and the answer come while the process is down (poll) or across it (webhook)
	}{
		{"poll", false, false},
		{"webhook", true, false},
		{"poll across a restart", false, true},
		{"webhook across a restart", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			set := surfacetest.SingleChoice("forged")
			answers := surfacetest.NewAnswers()
			answers.Add(set)
			ledger := newStoreLedger(answers)
			// start starts a process asking set; register waits until its
			// Ask takes answers (not when the answer is there already:
			// the Ask may have taken it and returned).
			start := func(register bool) (*process, http.Handler) {
				cfg := f.config(1)
				cfg.Ledger = ledger
				cfg.WebhookSecret = hookSecret
				if tc.webhook {
					cfg.PollInterval = time.Hour // only the webhook brings comments
				}
				ctx, cancel := context.WithTimeout(context.Background(), waitLong)
				t.Cleanup(cancel)
				p := &process{s: f.surface(t, cfg), ctx: ctx, cancel: cancel, chs: map[string]<-chan askResult{}}
				h, err := p.s.WebhookHandler()
				if err != nil {
					t.Fatal(err)
				}
				p.ask(set, answers)
				f.waitAsked(t, set)
				if register {
					p.waitRegistered(t, 1)
				}
				return p, h
			}
			forge := func(h http.Handler) []int64 {
				var ids []int64
				for _, body := range forgeries(set) {
					id := f.srv.AddComment(testRepo, 1, "mallory", body)
					ids = append(ids, id)
					if h != nil {
						f.deliver(t, h, id)
					}
				}
				return ids
			}

			p, h := start(true)
			var forged []int64
			var answer int64
			switch {
			case !tc.restart:
				if !tc.webhook {
					h = nil
				}
				forged = forge(h)
				answer = f.srv.AddComment(testRepo, 1, "alice", "2")
				if tc.webhook {
					f.deliver(t, h, answer)
				}
			case !tc.webhook:
				p.stop(t)
				forged = forge(nil)
				answer = f.srv.AddComment(testRepo, 1, "alice", "2")
				p, _ = start(false)
			default:
				forged = forge(h) // the first process reads them
				p.stop(t)
				p, h = start(true)
				answer = f.srv.AddComment(testRepo, 1, "alice", "2")
				f.deliver(t, h, answer)
			}
			r := waitResult(t, p.chs[set.ID])
			if r.err != nil || r.resp.By != "@alice" || !slices.Equal(r.resp.Answers[0].Labels, []string{set.Questions[0].Options[1].Label}) {
				t.Fatalf("Ask = %+v, %v; want alice's option 2", r.resp, r.err)
			}
			f.srv.WaitFor(t, waitLong, "👀 on the answer", func() bool { return len(f.srv.Reactions(testRepo, answer)) > 0 })
			if got := f.srv.Reactions(testRepo, answer); !slices.Equal(got, []string{"eyes"}) {
				t.Errorf("reactions on the answer %v, want one eyes (taken once)", got)
			}
			var own []githubtest.Comment
			for _, c := range f.questionComments(set) {
				if c.Login == "orchestrator-bot" {
					own = append(own, c)
				}
			}
			if len(own) != 1 {
				t.Fatalf("%d question comments by the orchestrator, want 1", len(own))
			}
			f.srv.WaitFor(t, waitLong, "the question shows its answer", func() bool {
				c, _ := f.srv.Comment(testRepo, own[0].ID)
				return bytes.Contains([]byte(c.Body), []byte(answeredMarker(set.ID, answer)))
			})
			for i, id := range forged {
				c, _ := f.srv.Comment(testRepo, id)
				if c.Body != forgeries(set)[i] || len(c.Reactions) > 0 {
					t.Errorf("forged comment %d was acted on: body changed %v, reactions %v", i, c.Body != forgeries(set)[i], c.Reactions)
				}
			}
		})
	}
}

// The identity is learned once per client: GET /user for a token.
func TestIdentityLearnedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	for _, name := range []string{"once-a", "once-b"} {
		set := surfacetest.SingleChoice(name)
		ch := startAsk(ctxTimeout(t), s, set)
		f.waitAsked(t, set)
		f.srv.AddComment(testRepo, 1, "alice", "/answer "+set.Questions[0].ID+" 1")
		if r := waitResult(t, ch); r.err != nil {
			t.Fatalf("Ask %s = %v", name, r.err)
		}
	}
	n := 0
	for _, r := range f.srv.Requests() {
		if r.Path == "/user" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("GET /user %d times, want once", n)
	}
	if me, err := s.c.self(ctxTimeout(t)); err != nil || me.login != "orchestrator-bot" || me.id == 0 {
		t.Errorf("self = %+v, %v; want orchestrator-bot with its ID", me, err)
	}
}

// A token that is no user (an installation token used as a plain token)
// cannot ask: the error says why, and nothing is posted.
func TestIdentityOfAnInstallationTokenIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.srv.Fail("GET", "/user", http.StatusForbidden, http.Header{}, `{"message":"Resource not accessible by integration"}`)
	set := surfacetest.SingleChoice("no-user")
	err := f.surface(t, f.config(1)).Ask(ctxTimeout(t), set, pending(set))
	if err == nil || !strings.Contains(err.Error(), "GET /user") || !strings.Contains(err.Error(), "personal access token") {
		t.Fatalf("Ask = %v, want an error saying the token is no user", err)
	}
	if n := len(f.questionComments(set)); n != 0 {
		t.Errorf("%d question comments posted", n)
	}
}

// A stranger's issue carrying a run's marker is not the run's issue: the
// orchestrator opens its own and asks there.
func TestForgedRunIssueIsNotTheRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	set := surfacetest.NewSet("forged-issue").Run("run-77").Single().Set()
	forged := f.srv.OpenIssue(testRepo, "mallory", "Questions from run run-77", "here\n\n"+runMarker("run-77"))
	ch := startAsk(ctxTimeout(t), f.surface(t, f.config(0)), set)
	q := f.waitAsked(t, set)
	if q.Issue == forged {
		t.Fatalf("asked on mallory's issue #%d", forged)
	}
	f.srv.AddComment(testRepo, q.Issue, "alice", "1")
	if r := waitResult(t, ch); r.err != nil || r.resp.By != "@alice" {
		t.Fatalf("Ask = %+v, %v; want alice's answer on the run's own issue", r.resp, r.err)
	}
}
