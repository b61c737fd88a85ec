package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// storeLedger stands in for the store across "restarts": the decisions
// about comments, and which sets are still open (those answers has no
// final answer for).
type storeLedger struct {
	*memLedger
	answers *surfacetest.Answers
}

func newStoreLedger(answers *surfacetest.Answers) *storeLedger {
	return &storeLedger{memLedger: newMemLedger(), answers: answers}
}

func (l *storeLedger) SetOpen(_ context.Context, setID string) (bool, error) {
	_, answered := l.answers.Final(setID)
	return !answered, nil
}

// process is one orchestrator process on the fixture's GitHub: a surface
// on issue 1 sharing the ledger (the store), with its Asks.
type process struct {
	s      *Surface
	cancel context.CancelFunc
	ctx    context.Context
	chs    map[string]<-chan askResult
}

func (f *fixture) process(t *testing.T, ledger Ledger) *process {
	cfg := f.config(1)
	cfg.Ledger = ledger
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	return &process{s: f.surface(t, cfg), ctx: ctx, cancel: cancel, chs: map[string]<-chan askResult{}}
}

func (p *process) ask(set questions.Set, answers *surfacetest.Answers) {
	p.chs[set.ID] = startAskWith(p.ctx, p.s, set, answers)
}

// stop ends the process: its Asks return, its client closes.
func (p *process) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	for id, ch := range p.chs {
		if r := waitResult(t, ch); r.err == nil {
			t.Errorf("Ask(%s) answered when the process stopped: %+v", id, r.resp)
		}
	}
	p.s.Close()
}

// waitRegistered waits until n Asks of p take answers on issue 1.
func (p *process) waitRegistered(t *testing.T, n int) {
	t.Helper()
	eventually(t, "Asks registered", func() bool {
		pl := p.s.c.lookupPoller(testRepo)
		return pl != nil && len(pl.waitersFor(1)) == n
	})
}

// count counts the comments of issue 1 containing s.
func (f *fixture) count(s string) int {
	n := 0
	for _, c := range f.srv.Comments(testRepo, 1) {
		if strings.Contains(c.Body, s) {
			n++
		}
	}
	return n
}

// Two runs wait on one issue; a bare "2" comes while the process is down.
// After the restart, whose Asks register one after the other, the reply
// answers neither (the bot says so once), and "/answer QID 2" answers one.
func TestTwoRunsOneIssueBareReplyAfterRestartAnswersNeither(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := surfacetest.NewSet("bare-a").Run("run-a").Single().Set()
	b := surfacetest.NewSet("bare-b").Run("run-b").Single().Set()
	answers := surfacetest.NewAnswers()
	answers.Add(a)
	answers.Add(b)
	ledger := newStoreLedger(answers)

	p1 := f.process(t, ledger)
	p1.ask(a, answers)
	f.waitAsked(t, a)
	p1.ask(b, answers)
	f.waitAsked(t, b)
	p1.stop(t)

	f.srv.AddComment(testRepo, 1, "alice", "2") // while down

	p2 := f.process(t, ledger)
	p2.ask(a, answers) // registered first, alone
	p2.waitRegistered(t, 1)
	f.srv.WaitFor(t, waitLong, "which-question reply", func() bool { return f.count("several questions are waiting on this issue") == 1 })
	f.waitPolls(t, 3)
	p2.ask(b, answers)
	p2.waitRegistered(t, 2)
	f.waitPolls(t, 3)
	for _, set := range []questions.Set{a, b} {
		if offers := answers.Offers(set.ID); len(offers) != 0 {
			t.Errorf("set %s was offered %+v; a bare reply while two sets wait answers neither", set.ID, offers)
		}
	}
	if n := f.count("several questions are waiting on this issue"); n != 1 {
		t.Errorf("%d which-question replies, want one", n)
	}

	f.srv.AddComment(testRepo, 1, "alice", "/answer "+a.Questions[0].ID+" 2")
	ra := waitResult(t, p2.chs[a.ID])
	if ra.err != nil || !slices.Equal(ra.resp.Answers[0].Labels, []string{"SQLite"}) {
		t.Fatalf("Ask(a) = %+v, %v; want SQLite from /answer", ra.resp, ra.err)
	}
	f.waitPolls(t, 3)
	if offers := answers.Offers(b.ID); len(offers) != 0 {
		t.Errorf("set b was offered %+v; only a was named", offers)
	}
	// Only b waits now: a bare reply is enough.
	f.srv.AddComment(testRepo, 1, "alice", "3")
	rb := waitResult(t, p2.chs[b.ID])
	if rb.err != nil || !slices.Equal(rb.resp.Answers[0].Labels, []string{"MySQL"}) {
		t.Fatalf("Ask(b) = %+v, %v; want MySQL", rb.resp, rb.err)
	}
}

// An edited comment is never an answer: neither one edited while the
// process ran, nor one edited while it was down ("banana" → "2"), which
// must not win over the maintainer's newer explicit answer. Each is told
// once, and a restart tells nobody again.
func TestEditedCommentNotTakenBeforeOrAfterRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	set := surfacetest.SingleChoice("edit-restart")
	answers := pending(set)
	ledger := newStoreLedger(answers)

	p1 := f.process(t, ledger)
	p1.ask(set, answers)
	f.waitAsked(t, set)
	live := f.srv.AddComment(testRepo, 1, "alice", "9") // an attempt (an option number), not one of the options
	f.srv.WaitFor(t, waitLong, "invalid-answer reply", func() bool { return f.count("could not be read") == 1 })
	f.srv.EditComment(testRepo, live, "1")
	f.waitPolls(t, 3)
	p1.stop(t)

	down := f.srv.AddComment(testRepo, 1, "alice", "banana")
	f.srv.EditComment(testRepo, down, "2")

	p2 := f.process(t, ledger)
	p2.ask(set, answers)
	f.srv.WaitFor(t, waitLong, "edited-comment reply", func() bool { return f.count("this comment was edited") == 1 })
	f.waitPolls(t, 3)
	if offers := answers.Offers(set.ID); len(offers) != 0 {
		t.Fatalf("offers %+v; an edited comment is never an answer", offers)
	}
	f.srv.AddComment(testRepo, 1, "maintainer-mo", "/answer "+set.Questions[0].ID+" 3")
	r := waitResult(t, p2.chs[set.ID])
	if r.err != nil || r.resp.By != "@maintainer-mo" || !slices.Equal(r.resp.Answers[0].Labels, []string{"MySQL"}) {
		t.Fatalf("Ask = %+v, %v; want the maintainer's MySQL", r.resp, r.err)
	}
	for _, id := range []int64{live, down} {
		if got := f.srv.Reactions(testRepo, id); len(got) != 0 {
			t.Errorf("reactions on edited comment %d = %v, want none", id, got)
		}
	}
	if n, m := f.count("could not be read"), f.count("this comment was edited"); n != 1 || m != 1 {
		t.Errorf("%d invalid-answer and %d edited replies, want one of each", n, m)
	}
}

// A restart reads every comment of the issue again: none is decided again
// and no notice is posted twice.
func TestRestartPostsNoDuplicateNotices(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := surfacetest.NewSet("dup-a").Run("run-a").Single().Set()
	b := surfacetest.NewSet("dup-b").Run("run-b").Single().Set()
	c := surfacetest.NewSet("dup-c").Run("run-c").Single().Set()
	answers := surfacetest.NewAnswers()
	for _, set := range []questions.Set{a, b, c} {
		answers.Add(set)
	}
	ledger := newStoreLedger(answers)

	p1 := f.process(t, ledger)
	for _, set := range []questions.Set{a, b, c} {
		p1.ask(set, answers)
		f.waitAsked(t, set)
	}
	p1.waitRegistered(t, 3)
	f.srv.AddComment(testRepo, 1, "alice", "/answer "+a.Questions[0].ID+" 1")
	if r := waitResult(t, p1.chs[a.ID]); r.err != nil {
		t.Fatalf("Ask(a) = %v", r.err)
	}
	delete(p1.chs, a.ID)
	f.srv.AddComment(testRepo, 1, "alice", "/answer "+b.Questions[0].ID+" banana")
	f.srv.AddComment(testRepo, 1, "alice", "2")
	f.srv.AddComment(testRepo, 1, "mallory", "1")
	// Told once each: the invalid answer, the bare reply, and the stranger
	// (once per set they cannot answer: b and c).
	f.srv.WaitFor(t, waitLong, "four notices", func() bool {
		return f.count("could not be read") == 1 && f.count("several questions are waiting on this issue") == 1 && f.count("but only people with write access") == 2
	})
	f.waitPolls(t, 3)
	offersB := len(answers.Offers(b.ID))
	p1.stop(t)

	before := len(f.srv.Comments(testRepo, 1))
	p2 := f.process(t, ledger)
	p2.ask(b, answers)
	p2.waitRegistered(t, 1)
	f.waitPolls(t, 3)
	p2.ask(c, answers)
	p2.waitRegistered(t, 2)
	f.waitPolls(t, 3)
	if after := len(f.srv.Comments(testRepo, 1)); after != before {
		for _, cm := range f.srv.Comments(testRepo, 1)[before:] {
			t.Errorf("restart posted: %q", cm.Body)
		}
	}
	if n := len(answers.Offers(b.ID)); n != offersB {
		t.Errorf("set b offered %d times after the restart, want %d (no comment decided again)", n, offersB)
	}
	if n := len(answers.Offers(c.ID)); n != 0 {
		t.Errorf("set c offered %d times, want none", n)
	}
	if n := len(answers.Offers(a.ID)); n != 1 {
		t.Errorf("set a offered %d times, want once", n)
	}
	p2.stop(t)
}

// One 502 when posting the question, whether the comment was created or
// not: the question is posted once and the answer still comes.
func TestOne502OnPostingPostsQuestionOnce(t *testing.T) {
	t.Parallel()
	for _, lost := range []bool{false, true} {
		name := "not created"
		if lost {
			name = "created, response lost"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			path := "/repos/" + testRepo + "/issues/1/comments"
			if lost {
				f.srv.LoseResponse("POST", path, http.StatusBadGateway)
			} else {
				f.srv.Fail("POST", path, http.StatusBadGateway, http.Header{}, `{"message":"Server Error"}`)
			}
			s := f.surface(t, f.config(1))
			set := surfacetest.SingleChoice("502")
			ch := startAsk(ctxTimeout(t), s, set)
			f.waitAsked(t, set)
			f.srv.AddComment(testRepo, 1, "alice", "2")
			if r := waitResult(t, ch); r.err != nil {
				t.Fatalf("Ask = %v, want the answer after the 502", r.err)
			}
			if n := len(f.questionComments(set)); n != 1 {
				t.Errorf("question posted %d times, want once", n)
			}
			var statuses []int
			for _, r := range f.srv.Requests() {
				if r.Method == "POST" && r.Path == path {
					statuses = append(statuses, r.Status)
				}
			}
			want := []int{http.StatusBadGateway, http.StatusCreated}
			if lost {
				want = want[:1] // found by its marker, not posted again
			}
			if !slices.Equal(statuses, want) {
				t.Errorf("POST statuses %v, want %v", statuses, want)
			}
		})
	}
}

// Opening the run's issue is not repeated when its response is lost.
func TestRunIssueOpenedOnceWhenResponseLost(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.srv.LoseResponse("POST", "/repos/"+testRepo+"/issues", http.StatusBadGateway)
	s := f.surface(t, f.config(0))
	set := surfacetest.SingleChoice("lost-issue")
	ch := startAsk(ctxTimeout(t), s, set)
	q := f.waitAsked(t, set)
	f.srv.AddComment(testRepo, q.Issue, "alice", "1")
	if r := waitResult(t, ch); r.err != nil {
		t.Fatalf("Ask = %v", r.err)
	}
	if n := len(f.srv.Issues(testRepo)); n != 2 {
		t.Errorf("%d issues, want the fixture's and one for the run", n)
	}
}

// Reads that fail with a 5xx or a network error are retried.
func TestTransientErrorsRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.srv.Fail("GET", "/repos/"+testRepo+"/issues/1/comments", http.StatusServiceUnavailable, http.Header{}, `{"message":"unavailable"}`)
	failed := false
	var mu sync.Mutex
	cfg := f.config(1)
	cfg.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		first := !failed && r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/permission")
		failed = failed || first
		mu.Unlock()
		if first {
			return nil, errors.New("connection reset by peer")
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	s := f.surface(t, cfg)
	set := surfacetest.SingleChoice("transient")
	ch := startAsk(ctxTimeout(t), s, set)
	f.waitAsked(t, set)
	f.srv.AddComment(testRepo, 1, "alice", "1")
	if r := waitResult(t, ch); r.err != nil {
		t.Fatalf("Ask = %v, want an answer despite a 503 and a reset connection", r.err)
	}
	if !failed {
		t.Error("the network error was never injected")
	}
}

// Content-creating requests are at least WriteInterval apart.
func TestContentCreatingRequestsPaced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config(1)
	const iv = 150 * time.Millisecond
	cfg.WriteInterval = iv
	var mu sync.Mutex
	var at []time.Time // when content-creating requests left the client
	cfg.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == "POST" || r.Method == "PATCH" {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	s := f.surface(t, cfg)
	long := strings.Repeat("The model explains at length. ", 5000) // three parts
	set := surfacetest.NewSet("paced").Context(long).Single().Set()
	ch := startAsk(ctxTimeout(t), s, set)
	f.srv.WaitFor(t, waitLong, "all parts", func() bool { return len(f.srv.Comments(testRepo, 1)) >= 3 })
	f.srv.AddComment(testRepo, 1, "alice", "1")
	if r := waitResult(t, ch); r.err != nil {
		t.Fatal(r.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) < 5 { // three parts, 👀, the edit
		t.Fatalf("%d content-creating requests, want at least 5", len(at))
	}
	for i := 1; i < len(at); i++ {
		if d := at[i].Sub(at[i-1]); d < iv-5*time.Millisecond { // the clock read and the send differ by a little
			t.Errorf("content-creating requests %d and %d are %v apart, want at least %v", i-1, i, d, iv)
		}
	}

	c, err := NewClient(ClientConfig{Token: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.transport.writeInterval != time.Second {
		t.Errorf("default write interval %v, want 1s as GitHub asks", c.transport.writeInterval)
	}
}

// The store keeps the decisions about comments.
var _ Ledger = (*store.Store)(nil)

// SetAnswer makes the stand-in an AnswerLedger, as the store is.
func (l *storeLedger) SetAnswer(_ context.Context, setID string) (questions.Response, bool, error) {
	r, ok := l.answers.Final(setID)
	return r, ok, nil
}

// forget drops the ledger's decisions about a comment: the process stopped
// after the store took its answer and before the decision was recorded.
func (l *storeLedger) forget(repo string, id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prefix := commentKey(repo, id)
	for k := range l.m {
		if k == prefix || strings.HasPrefix(k, prefix+"/") {
			delete(l.m, k)
		}
	}
}

// An answer the store took, when the process stopped before recording its
// decision about the comment (and before the question showed who
// answered): after the restart, with two other sets waiting on the issue,
// the comment is neither told "which set?" nor offered to the others.
func TestTakenAnswerGetsNoNoticeAfterTheCrashWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		others int
		shown  bool // the question comment shows who answered
	}{{1, false}, {2, false}, {2, true}} {
		others := tc.others
		t.Run(fmt.Sprintf("%d others, shown %v", others, tc.shown), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			a := surfacetest.NewSet("crash-a").Run("run-a").Single().Set()
			sets := []questions.Set{a}
			for i := range others {
				sets = append(sets, surfacetest.NewSet("crash-"+string(rune('b'+i))).Run("run-"+string(rune('b'+i))).Single().Set())
			}
			answers := surfacetest.NewAnswers()
			for _, set := range sets {
				answers.Add(set)
			}
			ledger := newStoreLedger(answers)

			p1 := f.process(t, ledger)
			var qa githubtest.Comment
			for i, set := range sets {
				p1.ask(set, answers)
				if c := f.waitAsked(t, set); i == 0 {
					qa = c
				}
			}
			p1.waitRegistered(t, len(sets))
			answer := f.srv.AddComment(testRepo, 1, "alice", "/answer "+a.Questions[0].ID+" 2")
			if r := waitResult(t, p1.chs[a.ID]); r.err != nil {
				t.Fatalf("Ask(a) = %v", r.err)
			}
			delete(p1.chs, a.ID)
			f.waitPolls(t, 2)
			p1.stop(t)
			// The crash window: the store has the answer, the ledger and
			// the question comment do not.
			ledger.forget(testRepo, answer)
			if !tc.shown {
				f.srv.EditComment(testRepo, qa.ID, qa.Body)
			}

			before := len(f.srv.Comments(testRepo, 1))
			p2 := f.process(t, ledger)
			for _, set := range sets[1:] {
				p2.ask(set, answers)
			}
			p2.waitRegistered(t, len(sets)-1)
			f.waitPolls(t, 3)
			for _, cm := range f.srv.Comments(testRepo, 1)[before:] {
				t.Errorf("after the restart the surface posted: %q", cm.Body)
			}
			for _, set := range sets[1:] {
				if offers := answers.Offers(set.ID); len(offers) != 0 {
					t.Errorf("set %s was offered %+v; the comment answered a", set.ID, offers)
				}
			}
			if d, _ := ledger.CommentDecision(context.Background(), commentKey(testRepo, answer)); d != decTaken {
				t.Errorf("the comment's decision is %q, want %q", d, decTaken)
			}
			p2.stop(t)
		})
	}
}
