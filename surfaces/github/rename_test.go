package github

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// A repository renamed while a question waits: GitHub's webhook delivery
// names it by its new name, and is matched by the repository's ID.
func TestWebhookRenamedRepository(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	f := newFixture(t)
	cfg := f.config(1)
	cfg.PollInterval = time.Hour // only the webhook can bring the answer
	cfg.WebhookSecret = secret
	s := f.surface(t, cfg)
	set := surfacetest.SingleChoice("renamed")
	ch := startAsk(ctxTimeout(t), s, set)
	f.waitAsked(t, set)
	waitWaiting(t, s)
	const renamed = "acme/app-renamed"
	f.srv.Rename(testRepo, renamed)
	answer := f.srv.AddComment(renamed, 1, "alice", "3")
	payload := f.srv.IssueCommentEvent(renamed, answer, "created")
	if code := deliver(t, s.c, secret, "issue_comment", "d-renamed", payload); code != http.StatusAccepted {
		t.Fatalf("delivery: status %d, want 202", code)
	}
	r := waitResult(t, ch)
	if r.err != nil || len(r.resp.Answers) != 1 || len(r.resp.Answers[0].Labels) != 1 || r.resp.Answers[0].Labels[0] != "MySQL" {
		t.Fatalf("Ask = %+v, %v; want the answer delivered under the new name", r.resp, r.err)
	}
	// Acknowledged through GitHub's redirects of the old name.
	f.srv.WaitFor(t, waitLong, "👀 on the answer", func() bool {
		for _, re := range f.srv.Reactions(renamed, answer) {
			if re == "eyes" {
				return true
			}
		}
		return false
	})
}

// recLedger is a durable Ledger shared by the surfaces of a test, as the
// store is by processes.
type recLedger struct {
	mu sync.Mutex
	m  map[string]string
}

func (l *recLedger) CommentDecision(_ context.Context, key string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[key], nil
}

func (l *recLedger) DecideComment(_ context.Context, key, d string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]string{}
	}
	if got, ok := l.m[key]; ok {
		return got, nil
	}
	l.m[key] = d
	return d, nil
}

func (l *recLedger) SetOpen(context.Context, string) (bool, error) { return true, nil }

// A run's own issue is recorded when it is opened: later questions of the
// run, from another process, go to it without listing the repository's
// issues (a label taken off it, or a thousand issues opened after it, do
// not lose it).
func TestRunIssueRecordedAtCreation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ledger := &recLedger{}
	cfg := f.config(0)
	cfg.Labels = []string{"orchestrator"}
	cfg.Ledger = ledger
	first := surfacetest.NewSet("own-issue").Single().Set()
	s := f.surface(t, cfg)
	ch := startAsk(ctxTimeout(t), s, first)
	c := f.waitAsked(t, first)
	got, _ := ledger.CommentDecision(context.Background(), runIssueKey(testRepo, first.RunID))
	if got != strconv.Itoa(c.Issue) {
		t.Fatalf("recorded issue of the run = %q, want %d", got, c.Issue)
	}
	f.srv.AddComment(testRepo, c.Issue, "alice", "1")
	if r := waitResult(t, ch); r.err != nil {
		t.Fatal(r.err)
	}

	// Another process; listing issues would fail.
	stop := f.srv.Refuse(http.MethodGet, "/repos/"+testRepo+"/issues", http.StatusInternalServerError, "Server Error")
	defer stop()
	f.srv.ResetRequests()
	second := surfacetest.NewSet("own-issue").Turn(2).Single().Set()
	other := f.surface(t, cfg)
	ch = startAsk(ctxTimeout(t), other, second)
	c2 := f.waitAsked(t, second)
	if c2.Issue != c.Issue {
		t.Errorf("second question on #%d, want the run's issue #%d", c2.Issue, c.Issue)
	}
	if n, err := other.RunIssue(ctxTimeout(t), first.RunID); err != nil || n != c.Issue {
		t.Errorf("RunIssue = %d, %v; want %d", n, err, c.Issue)
	}
	for _, r := range f.srv.Requests() {
		if r.Path == "/repos/"+testRepo+"/issues" {
			t.Errorf("the repository's issues were listed (%s %s?%s)", r.Method, r.Path, r.RawQuery)
		}
	}
	if n := len(f.srv.Issues(testRepo)); n != 2 { // the fixture's issue 1, and the run's
		t.Errorf("%d issues, want 2", n)
	}
	f.srv.AddComment(testRepo, c.Issue, "alice", "1")
	if r := waitResult(t, ch); r.err != nil {
		t.Fatal(r.err)
	}
}

// On a cluster the instance that got the webhook delivery of a renamed
// repository nudges the asking one with the new name: PollNow polls all the
// same.
func TestPollNowRenamedRepository(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config(1)
	cfg.PollInterval = time.Hour // only PollNow can bring the answer
	s := f.surface(t, cfg)
	set := surfacetest.SingleChoice("renamed-nudge")
	ch := startAsk(ctxTimeout(t), s, set)
	f.waitAsked(t, set)
	eventually(t, "waiter", func() bool {
		p := s.c.lookupPoller(testRepo)
		return p != nil && len(p.waitersFor(1)) == 1
	})
	const renamed = "acme/app-moved"
	f.srv.Rename(testRepo, renamed)
	f.srv.AddComment(renamed, 1, "alice", "2")
	s.c.PollNow(renamed, 1)
	if r := waitResult(t, ch); r.err != nil || len(r.resp.Answers) != 1 {
		t.Fatalf("Ask = %+v, %v; want the answer read after the nudge", r.resp, r.err)
	}
}

// A run whose issue was opened before issues were recorded (an older
// orchestrator) has none in the ledger: its next question goes to that
// issue, found once by its marker among the issues the orchestrator's own
// identity opened (a stranger's newer issue with the same marker is not
// it), and recorded, so that the run never gets a second issue and the
// issue is not looked for again.
func TestRunIssueBeforeRecordsFoundOnceAndRecorded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ledger := &recLedger{}
	cfg := f.config(0)
	cfg.Labels = []string{"orchestrator"}
	cfg.Ledger = ledger
	set := surfacetest.NewSet("legacy-issue").Turn(3).Single().Set()
	body := "The orchestrator asks the questions of run `" + set.RunID + "` here.\n\n" + runMarker(set.RunID)
	legacy := f.srv.OpenIssue(testRepo, "orchestrator-bot", "Questions from run "+set.RunID, body, "orchestrator")
	forged := f.srv.OpenIssue(testRepo, "mallory", "Questions from run "+set.RunID, body, "orchestrator")
	issues := len(f.srv.Issues(testRepo))

	s := f.surface(t, cfg)
	ch := startAsk(ctxTimeout(t), s, set)
	c := f.waitAsked(t, set)
	if c.Issue != legacy {
		t.Fatalf("question on #%d, want the run's issue #%d (not the forged #%d)", c.Issue, legacy, forged)
	}
	if got, _ := ledger.CommentDecision(context.Background(), runIssueKey(testRepo, set.RunID)); got != strconv.Itoa(legacy) {
		t.Errorf("recorded issue of the run = %q, want %d", got, legacy)
	}
	f.srv.AddComment(testRepo, legacy, "alice", "1")
	if r := waitResult(t, ch); r.err != nil {
		t.Fatal(r.err)
	}

	// The next question, from another process, where listing issues fails.
	stop := f.srv.Refuse(http.MethodGet, "/repos/"+testRepo+"/issues", http.StatusInternalServerError, "Server Error")
	defer stop()
	next := surfacetest.NewSet("legacy-issue").Turn(4).Single().Set()
	other := f.surface(t, cfg)
	ch = startAsk(ctxTimeout(t), other, next)
	if c := f.waitAsked(t, next); c.Issue != legacy {
		t.Errorf("next question on #%d, want #%d", c.Issue, legacy)
	}
	if n := len(f.srv.Issues(testRepo)); n != issues {
		t.Errorf("%d issues, want %d: none opened", n, issues)
	}
	f.srv.AddComment(testRepo, legacy, "alice", "1")
	if r := waitResult(t, ch); r.err != nil {
		t.Fatal(r.err)
	}
}
