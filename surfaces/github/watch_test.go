package github

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// memRefs is Refs kept in memory, shared by the processes of a test as
// the store would be.
type memRefs struct {
	mu sync.Mutex
	m  map[string]string
}

func newMemRefs() *memRefs { return &memRefs{m: make(map[string]string)} }

func (r *memRefs) Ref(_ context.Context, key string) (string, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[key]
	return v, ok, nil
}

func (r *memRefs) SetRef(_ context.Context, key, value string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[key] = value
	return nil
}

// watchAsking asks by Watch: Ask watches the set and waits for its
// context (or the client's) to end, then lets the set go, as the runner's
// ask room does.
type watchAsking struct{ *Surface }

func (w watchAsking) Ask(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	if err := w.Watch(ctx, set, answers); err != nil {
		return err
	}
	defer w.Unwatch(set.ID)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-w.c.ctx.Done():
		return fmt.Errorf("github: client closed: %w", surfaces.ErrUnavailable)
	}
}

// TestConformanceWatch runs the conformance suite on Watch (through
// watchAsking) and on Ask, both with Refs: a restart finds the question by
// its record.
func TestConformanceWatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		issue int
		watch bool
	}{
		{"WatchFixedIssue", 1, true},
		{"WatchIssuePerRun", 0, true},
		{"AskWithRefsFixedIssue", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			refs := newMemRefs()
			ledger := newMemLedger()
			post := func(t *testing.T, login string, set questions.Set, answers []questions.Answer) {
				c := f.waitAsked(t, set)
				f.srv.AddComment(testRepo, c.Issue, login, answerBody(set, answers, false))
			}
			surfacetest.Run(t, surfacetest.Backend{
				New: func(t *testing.T) surfaces.Surface {
					cfg := f.config(tc.issue)
					cfg.Refs, cfg.Ledger = refs, ledger
					s := f.surface(t, cfg)
					if tc.watch {
						return watchAsking{s}
					}
					return s
				},
				Answer:  func(t *testing.T, set questions.Set, answers []questions.Answer) { post(t, "alice", set, answers) },
				Intrude: func(t *testing.T, set questions.Set, answers []questions.Answer) { post(t, "mallory", set, answers) },
				Posted:  func(t *testing.T, set questions.Set) int { return len(f.questionComments(set)) },
				Transient: func(t *testing.T, set questions.Set) {
					if tc.issue != 0 {
						f.srv.Fail(http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/comments", testRepo, tc.issue), http.StatusBadGateway, nil, `{"message":"Server Error"}`)
					} else {
						f.srv.LoseResponse(http.MethodPost, "/repos/"+testRepo+"/issues", http.StatusBadGateway)
					}
				},
				Shown:  func(t *testing.T, set questions.Set) string { return f.shown(set) },
				Person: "alice",
				Features: surfacetest.Features{
					MultiSelect: true, FreeText: true, MultiQuestion: true, AnswerWhileDown: true,
				},
			})
		})
	}
}

// waitingIssue is a fake GitHub on a fake clock where question sets wait
// on issue 1, asked by a first process that polled and stopped.
type waitingIssue struct {
	srv    *githubtest.Server
	clock  *fakeClock
	refs   Refs // nil: none
	ledger Ledger
	sets   []questions.Set
}

// seedWaitingIssue has a first process Watch n sets on issue 1, poll once
// five minutes later, and stop.
func seedWaitingIssue(tb testing.TB, n int, refs Refs) *waitingIssue {
	tb.Helper()
	srv := githubtest.NewServer(tb)
	srv.RequireToken(testToken)
	srv.SetPermission("alice", "write")
	srv.CreateIssue(testRepo, "Questions") // issue 1
	srv.CreateIssue(testRepo, "Elsewhere") // issue 2
	w := &waitingIssue{srv: srv, clock: newFakeClock(), refs: refs, ledger: newMemLedger()}
	srv.SetNow(w.clock.Now)
	c, s := w.process(tb)
	answers := surfacetest.NewAnswers()
	for i := range n {
		set := surfacetest.NewSet(fmt.Sprintf("wait-%d", i)).Single().Set()
		answers.Add(set)
		if err := s.Watch(context.Background(), set, answers); err != nil {
			tb.Fatalf("Watch %d: %v", i, err)
		}
		w.sets = append(w.sets, set)
	}
	w.clock.Advance(5 * time.Minute)
	w.poll(1)
	c.Close()
	return w
}

// process starts a process: a client of its own on the same GitHub, Refs
// and Ledger, and its surface on issue 1.
func (w *waitingIssue) process(tb testing.TB) (*Client, *Surface) {
	tb.Helper()
	c, err := NewClient(ClientConfig{BaseURL: w.srv.URL(), Token: testToken, now: w.clock.Now, sleep: w.clock.Sleep,
		WriteInterval: -1, Ledger: w.ledger, Refs: w.refs})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	s, err := c.Surface(SurfaceConfig{Repo: testRepo, Issue: 1})
	if err != nil {
		tb.Fatal(err)
	}
	return c, s
}

// poll lets n poll intervals pass, each poll done before the next.
func (w *waitingIssue) poll(n int) {
	for range n {
		w.clock.BlockUntil(1)
		w.clock.Advance(DefaultPollInterval)
	}
	w.clock.BlockUntil(1)
}

// restart starts a second process ten minutes later, after alice answered
// one set and people wrote comments elsewhere, pagesDown pages in all; it
// Watches every set again, and polls once. It returns the requests the
// Watches made and those of the poll, and the set alice answered.
func (w *waitingIssue) restart(tb testing.TB, pagesDown int) (watching, polling []githubtest.Request, answered questions.Set, answers *surfacetest.Answers) {
	tb.Helper()
	w.clock.Advance(10 * time.Minute)
	answered = w.sets[len(w.sets)/2]
	w.srv.AddComment(testRepo, 1, "alice", fmt.Sprintf("/answer %s %s", answered.Questions[0].ID, answered.Questions[0].Options[1].Label))
	for i := range pagesDown*perPage - perPage/2 {
		w.srv.AddComment(testRepo, 2, "bob", fmt.Sprintf("unrelated %d", i))
	}

	w.srv.ResetRequests()
	_, s := w.process(tb)
	answers = surfacetest.NewAnswers()
	for _, set := range w.sets {
		answers.Add(set)
		if err := s.Watch(context.Background(), set, answers); err != nil {
			tb.Fatalf("Watch after restart: %v", err)
		}
	}
	watching = w.srv.Requests()
	w.srv.ResetRequests()
	w.poll(1)
	// The answer's acknowledgements are done once the question shows it.
	w.srv.WaitFor(tb, waitLong, "the question shows its answer", func() bool {
		for _, c := range w.srv.Comments(testRepo, 1) {
			if strings.Contains(c.Body, "<!-- orchestrator:answered set="+markerValue(answered.ID)+" ") {
				return true
			}
		}
		return false
	})
	polling = w.srv.Requests()
	return watching, polling, answered, answers
}

// TestRestartWithAThousandQuestionsListsNoIssue: a thousand sets wait on
// one issue (eleven pages of comments); after a restart, Watching all of
// them again makes no request, and the first poll reads the repository's
// comments from the recorded cursor: one request per page changed while
// the process was down, and the answer given then is taken.
func TestRestartWithAThousandQuestionsListsNoIssue(t *testing.T) {
	t.Parallel()
	w := seedWaitingIssue(t, 1000, newMemRefs())
	watching, polling, answered, answers := w.restart(t, 2)

	for _, r := range watching {
		// Only the poller's own, once per repository: its ID.
		if r.Path != "/repos/"+testRepo {
			t.Errorf("Watch after a restart made a request: %s %s?%s", r.Method, r.Path, r.RawQuery)
		}
	}
	lists, other := 0, len(watching)
	for _, r := range polling {
		switch {
		case r.Method == http.MethodGet && r.Path == "/repos/"+testRepo+"/issues/comments":
			lists++
		case r.Method == http.MethodGet && strings.HasPrefix(r.Path, "/repos/"+testRepo+"/issues/"):
			t.Errorf("the poll after a restart read an issue: %s %s?%s", r.Method, r.Path, r.RawQuery)
		default:
			other++
		}
	}
	t.Logf("restart with 1000 questions waiting: %d requests (%d pages listed)", len(watching)+len(polling), lists)
	for _, r := range append(watching, polling...) {
		t.Logf("  %s %s?%s %d", r.Method, r.Path, r.RawQuery, r.Status)
	}
	// Two pages changed while down: alice's answer and 149 comments
	// elsewhere.
	if lists != 2 {
		t.Errorf("the first poll listed %d pages, want the 2 that changed", lists)
	}
	// The repository's ID, who the orchestrator is, alice's permission,
	// 👀 on her answer and the question edited to show it.
	if other > 5 {
		t.Errorf("the first poll made %d requests besides the listing, want at most 5:", other)
		for _, r := range polling {
			t.Logf("%s %s?%s %d", r.Method, r.Path, r.RawQuery, r.Status)
		}
	}
	resp, ok := answers.Final(answered.ID)
	if !ok {
		t.Fatalf("the answer given while down was not taken")
	}
	if got := resp.Answers[0].Labels; len(got) != 1 || got[0] != answered.Questions[0].Options[1].Label {
		t.Errorf("answer %v, want %q", got, answered.Questions[0].Options[1].Label)
	}
	if n := len(w.srv.Comments(testRepo, 1)); n != 1001 {
		t.Errorf("issue 1 has %d comments, want the 1000 questions and the answer (nothing posted again)", n)
	}
}

// BenchmarkRestartRequests has sets wait on one issue, restarts (a new
// process Watches every set again, after an answer and a page and a half
// of other comments were posted while down) and lets an hour of polling
// pass at the default interval. It reports the requests of asking every
// set the first time (and one poll), those of the restart
// (until the answer given while down is taken and acknowledged) and those
// of the hour per waiting question, with Refs (the store) and without
// (every set's issue listed again). Without Refs it asks 400 sets only:
// the fake's rate limit (5,000 requests, as GitHub's hourly one) does not
// last through more.
func BenchmarkRestartRequests(b *testing.B) {
	for _, bc := range []struct {
		name string
		n    int
		refs bool
	}{
		{"Refs/1000", 1000, true},
		{"Refs/400", 400, true},
		{"NoRefs/400", 400, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var asking, restart, hour, notModified int
			for b.Loop() {
				var refs Refs
				if bc.refs {
					refs = newMemRefs()
				}
				w := seedWaitingIssue(b, bc.n, refs)
				asking = len(w.srv.Requests())
				watching, polling, _, _ := w.restart(b, 2)
				restart = len(watching) + len(polling)
				w.srv.ResetRequests()
				w.poll(int(time.Hour / DefaultPollInterval))
				reqs := w.srv.Requests()
				hour, notModified = len(reqs), 0
				for _, r := range reqs {
					if r.Status == http.StatusNotModified {
						notModified++
					}
				}
			}
			b.ReportMetric(float64(asking), "requests-to-ask-all")
			b.ReportMetric(float64(restart), "requests/restart")
			b.ReportMetric(float64(hour)/float64(bc.n), "requests/question/hour")
			b.ReportMetric(float64(hour-notModified)/float64(bc.n), "rate-limited-requests/question/hour")
		})
	}
}

// TestDeletedQuestionPostedAgain: a set found by its record after a
// restart whose question comment was deleted meanwhile is posted again
// when a reminder is due (one GET answering 404, then the post, and no
// reminder), or as soon as the webhook tells of the deletion; an answer
// to the new comment is taken.
func TestDeletedQuestionPostedAgain(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"remind", "webhook"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			const secret = "s3cret"
			f := newFixture(t)
			cfg := f.config(1)
			cfg.Refs, cfg.Ledger, cfg.WebhookSecret = newMemRefs(), newMemLedger(), secret
			set := surfacetest.SingleChoice("deleted-" + how)
			answers := pending(set)
			first := f.surface(t, cfg)
			if err := first.Watch(ctxTimeout(t), set, answers); err != nil {
				t.Fatal(err)
			}
			q := f.waitAsked(t, set)
			first.Close()
			payload := f.srv.IssueCommentEvent(testRepo, q.ID, "deleted")
			f.srv.DeleteComment(testRepo, q.ID)

			s := f.surface(t, cfg)
			if err := s.Watch(ctxTimeout(t), set, answers); err != nil {
				t.Fatal(err)
			}
			defer s.Unwatch(set.ID)
			f.srv.ResetRequests()
			switch how {
			case "remind":
				if err := s.Remind(ctxTimeout(t), set); err != nil {
					t.Fatalf("Remind: %v", err)
				}
			case "webhook":
				h, err := s.WebhookHandler()
				if err != nil {
					t.Fatal(err)
				}
				req := httptest.NewRequest("POST", "/webhook", bytes.NewReader(payload))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-GitHub-Event", "issue_comment")
				req.Header.Set("X-GitHub-Delivery", "d-deleted")
				req.Header.Set("X-Hub-Signature-256", githubtest.Signature(secret, payload))
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusAccepted {
					t.Fatalf("deletion delivery: status %d, want 202", rec.Code)
				}
			}
			q2 := f.waitAsked(t, set)
			if q2.ID == q.ID {
				t.Fatalf("the deleted question is still shown")
			}
			var reads, posts int
			for _, r := range f.srv.Requests() {
				switch {
				case r.Method == http.MethodGet && r.Path == fmt.Sprintf("/repos/%s/issues/comments/%d", testRepo, q.ID):
					reads++
					if r.Status != http.StatusNotFound {
						t.Errorf("GET of the deleted question: status %d, want 404", r.Status)
					}
				case r.Method == http.MethodGet && strings.HasPrefix(r.Path, "/repos/"+testRepo+"/issues/1"):
					t.Errorf("the issue was read: %s %s?%s", r.Method, r.Path, r.RawQuery)
				case r.Method == http.MethodPost && r.Path == "/repos/"+testRepo+"/issues/1/comments":
					posts++
				}
			}
			if want := map[string]int{"remind": 1, "webhook": 0}[how]; reads != want {
				t.Errorf("%d reads of the deleted question, want %d", reads, want)
			}
			if posts != 1 {
				t.Errorf("%d comments posted, want the question once (no reminder)", posts)
			}
			if n := len(f.questionComments(set)); n != 1 {
				t.Errorf("question shown %d times, want once", n)
			}

			want := []questions.Answer{surfacetest.Choose(set.Questions[0], "Postgres")}
			f.srv.AddComment(testRepo, 1, "alice", answerBody(set, want, false))
			resp, err := answers.WaitFinal(ctxTimeout(t), set.ID)
			if err != nil {
				t.Fatalf("no answer taken: %v", err)
			}
			surfacetest.CheckResponse(t, "github", set, resp, want, q.CreatedAt)
			f.srv.WaitFor(t, waitLong, "the new question shows the answer", func() bool {
				c, ok := f.srv.Comment(testRepo, q2.ID)
				return ok && strings.Contains(c.Body, "orchestrator:answered")
			})
		})
	}
}

// TestWatchTwiceAndUnwatch: Watching a set watched already makes no
// request; Unwatch lets it go (no waiter, nothing kept of it once it is
// answered) and makes no request either; Watching it again after a
// restart makes none (its record).
func TestWatchTwiceAndUnwatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	set := surfacetest.SingleChoice("twice")
	answers := pending(set)
	if err := s.Watch(ctxTimeout(t), set, answers); err != nil {
		t.Fatal(err)
	}
	f.waitAsked(t, set)
	p := s.c.lookupPoller(testRepo)
	eventually(t, "the poller's ID", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.id != 0
	})
	before := len(f.srv.Requests())
	if err := s.Watch(ctxTimeout(t), set, answers); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.srv.Requests()[before:] {
		if r.Path != "/repos/"+testRepo+"/issues/comments" { // the poller's
			t.Errorf("second Watch made a request: %s %s", r.Method, r.Path)
		}
	}
	if n := len(p.waitersFor(1)); n != 1 {
		t.Fatalf("%d waiters after two Watches, want 1", n)
	}

	want := []questions.Answer{surfacetest.Choose(set.Questions[0], "Postgres")}
	f.srv.AddComment(testRepo, 1, "alice", answerBody(set, want, false))
	if _, err := answers.WaitFinal(ctxTimeout(t), set.ID); err != nil {
		t.Fatal(err)
	}
	f.srv.WaitFor(t, waitLong, "the question shows the answer", func() bool {
		return strings.Contains(f.shown(set), "orchestrator:answered")
	})
	s.Unwatch(set.ID)
	s.Unwatch(set.ID) // idempotent
	p.mu.Lock()
	waiters, watched := len(p.waiters), len(p.watched)
	p.mu.Unlock()
	if waiters != 0 || watched != 0 {
		t.Errorf("after Unwatch: %d waiters, %d watched, want none", waiters, watched)
	}
	if a := s.c.askedInfo(s.key(set.ID)); a != nil {
		t.Errorf("after Unwatch the client still keeps where the set was asked")
	}
	p.proc.Lock()
	st := p.issues[1]
	p.proc.Unlock()
	if st != nil {
		t.Errorf("after the last Unwatch on the issue its state is kept")
	}

	// Resumed after the Unwatch finds the answer by the set's record.
	f.srv.ResetRequests()
	if err := s.Resumed(ctxTimeout(t), set); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.srv.Requests() {
		if r.Method == http.MethodGet && strings.HasPrefix(r.Path, "/repos/"+testRepo+"/issues/1") {
			t.Errorf("Resumed read the issue: %s %s", r.Method, r.Path)
		}
	}
}

// TestWatchAgainAfterThePollerGaveUp: a poll refused for good (the
// repository answers 404) ends the Watch; Watching the set again once the
// repository is back takes its answer.
func TestWatchAgainAfterThePollerGaveUp(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	set := surfacetest.SingleChoice("gave-up")
	answers := pending(set)
	f.srv.FailAlways(http.MethodGet, "/repos/"+testRepo+"/issues/comments", http.StatusNotFound, nil, `{"message":"Not Found"}`)
	if err := s.Watch(ctxTimeout(t), set, answers); err != nil {
		t.Fatal(err)
	}
	p := s.c.lookupPoller(testRepo)
	eventually(t, "the poller giving up", func() bool {
		w := p.watchedSet(s.key(set.ID))
		return w != nil && w.finished()
	})
	f.srv.ClearFaults()
	if err := s.Watch(ctxTimeout(t), set, answers); err != nil {
		t.Fatal(err)
	}
	want := []questions.Answer{surfacetest.Choose(set.Questions[0], "Postgres")}
	f.srv.AddComment(testRepo, 1, "alice", answerBody(set, want, false))
	if _, err := answers.WaitFinal(ctxTimeout(t), set.ID); err != nil {
		t.Fatal(err)
	}
	if n := len(f.questionComments(set)); n != 1 {
		t.Errorf("question posted %d times, want once", n)
	}
}
