package github

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

type githubtestIssue = githubtest.Issue

// Discussion on the issue while a question waits gets no reply from the
// orchestrator, from someone who may answer or not, and is recorded as not
// an answer (a restart does not decide it again); an answer after it is
// taken.
func TestDiscussionCommentIgnored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	set := surfacetest.SingleChoice("discussion")
	answers := pending(set)
	ledger := newStoreLedger(answers)
	cfg := f.config(1)
	cfg.Ledger = ledger
	s := f.surface(t, cfg)
	ch := startAskWith(ctxTimeout(t), s, set, answers)
	f.waitAsked(t, set)

	talk := []int64{
		f.srv.AddComment(testRepo, 1, "alice", "I think we should talk about this at standup first."),
		f.srv.AddComment(testRepo, 1, "mallory", "+1, the last migration hurt."),
		f.srv.AddComment(testRepo, 1, "alice", "Postgres has been slow for us, hmm"),
	}
	for _, id := range talk {
		key := commentKey(testRepo, id)
		eventually(t, "discussion recorded", func() bool {
			d, _ := ledger.CommentDecision(context.Background(), key)
			return d == decDiscussion
		})
	}
	notReturned(t, ch, f)
	if n := len(f.srv.Comments(testRepo, 1)); n != 1+len(talk) {
		t.Errorf("%d comments on the issue, want the question and the %d discussion comments (no reply)", n, len(talk))
	}
	if offers := answers.Offers(set.ID); len(offers) != 0 {
		t.Errorf("discussion offered as answers: %+v", offers)
	}

	// A restart reads them again: still no reply.
	s.Close()
	s2 := f.surface(t, cfg)
	ch2 := startAskWith(ctxTimeout(t), s2, set, answers)
	f.waitPolls(t, 3)
	if n := len(f.srv.Comments(testRepo, 1)); n != 1+len(talk) {
		t.Errorf("after a restart, %d comments on the issue, want %d", n, 1+len(talk))
	}
	f.srv.AddComment(testRepo, 1, "alice", "2")
	if r := waitResult(t, ch2); r.err != nil || !slices.Equal(r.resp.Answers[0].Labels, []string{"SQLite"}) {
		t.Fatalf("Ask = %+v, %v; want SQLite", r.resp, r.err)
	}
	<-ch
}

// What counts as an answer attempt.
func TestAnswerAttemptClassification(t *testing.T) {
	t.Parallel()
	single := surfacetest.SingleChoice("classify")
	other := surfacetest.Other("classify-other")
	free := surfacetest.FreeText("classify-free")
	qid := single.Questions[0].ID
	for _, tc := range []struct {
		set  questions.Set
		body string
		want bool
	}{
		{single, "2", true},
		{single, "sqlite", true},
		{single, "9", true}, // a wrong number: told what is valid
		{single, "1, 3", true},
		{single, "/answer " + qid + " maybe", true},
		{single, qid + ": 2", true},
		{single, "maybe later", false},
		{single, "Postgres has been slow for us", false},
		{single, "lgtm", false},
		{other, "MPL-2.0 please", false},
		{other, "/answer " + other.Questions[0].ID + " MPL-2.0 please", true},
		{free, "the real answer", true}, // a question asking for words takes any reply
		{other, "other: MPL-2.0", true}, // the free-text form beside options
		{single, single.Questions[0].Header + ": 2", true},
		{single, "1: sqlite", true},
		{single, "Postgres: yes please", true}, // a label, then words
		// Near misses of an option: a single short line that tries to
		// answer and gets the valid options.
		{single, "postgress", true},
		{single, "Postgress please", true},
		{single, "sqlit", true},
		{single, "mysq", true},
		{single, "option 4", true},
		{single, "#4", true},
		{single, "4)", true},
		{single, "postgress is what we run elsewhere anyway", false},
		{single, "ok", false},
		{single, "sounds good to me", false},
		{single, "option 4\nor maybe not", false},
	} {
		if got := looksLikeAnswer(tc.set, tc.body); got != tc.want {
			t.Errorf("looksLikeAnswer(%s, %q) = %v, want %v", tc.set.Questions[0].Header, tc.body, got, tc.want)
		}
	}
	q := renderParts(other)[0]
	if !quotes("> Which license should the project use?\n\nMPL-2.0", q) || !quotes("> 2. Apache-2.0 — Permissive, with a patent grant.\n\nthis one", q) {
		t.Errorf("a quote of the question is not recognised")
	}
	if quotes("> something someone else said\n\nagreed", q) {
		t.Errorf("a quote of another comment is taken for a quote of the question")
	}
}

// closeAfterAsk asks set on s, stops asking (as the runner does when the run
// is cancelled or the question times out) and closes it with reason.
func closeAfterAsk(t *testing.T, f *fixture, s *Surface, set questions.Set, reason string) (question int64, answers *surfacetest.Answers) {
	t.Helper()
	answers = pending(set)
	ctx, cancel := context.WithCancel(ctxTimeout(t))
	ch := startAskWith(ctx, s, set, answers)
	q := f.waitAsked(t, set)
	cancel()
	if r := waitResult(t, ch); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Ask = %+v, %v; want it cancelled", r.resp, r.err)
	}
	answers.Close(set.ID, nil) // expired in the store
	if err := s.CloseSet(ctxTimeout(t), set, reason); err != nil {
		t.Fatalf("CloseSet: %v", err)
	}
	return q.ID, answers
}

// checkClosedOnce checks that the question comment shows want, that
// discussion gets no reply, that the first reply to the question is told it
// is closed, and that nothing more is said or offered after that.
func checkClosedOnce(t *testing.T, f *fixture, s *Surface, set questions.Set, question int64, answers *surfacetest.Answers, want string) {
	t.Helper()
	c, _ := f.srv.Comment(testRepo, question)
	if !strings.HasPrefix(c.Body, "> [!WARNING]\n> ⛔ **Closed: "+want+".**") || !strings.Contains(c.Body, "Which database should the service use?") {
		t.Fatalf("question comment = %q, want it shown closed (%s) above the question", c.Body, want)
	}
	// Closing again changes nothing.
	if err := s.CloseSet(ctxTimeout(t), set, "something else"); err != nil {
		t.Fatalf("CloseSet again: %v", err)
	}
	if again, _ := f.srv.Comment(testRepo, question); again.Body != c.Body {
		t.Errorf("closing again edited the comment: %q", again.Body)
	}

	f.srv.AddComment(testRepo, 1, "alice", "shame, I was about to look at it")
	f.waitPolls(t, 3)
	if n := f.count("this question is closed"); n != 0 {
		t.Fatalf("discussion after the close got %d closed notices, want none", n)
	}
	f.srv.AddComment(testRepo, 1, "alice", "2")
	f.srv.WaitFor(t, waitLong, "closed notice", func() bool { return f.count("this question is closed") == 1 })
	f.srv.AddComment(testRepo, 1, "maintainer-mo", "/answer "+set.Questions[0].ID+" 1")
	f.waitPolls(t, 3)
	if n := f.count("this question is closed"); n != 1 {
		t.Errorf("%d closed notices, want exactly one", n)
	}
	if offers := answers.Offers(set.ID); len(offers) != 0 {
		t.Errorf("replies to a closed question were offered: %+v", offers)
	}
	if n := f.count("could not be read"); n != 0 {
		t.Errorf("%d invalid-answer replies to a closed question", n)
	}
}

func TestCancelledQuestionCommentUpdatedAndReplyToldClosedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	set := surfacetest.SingleChoice("cancelled")
	q, answers := closeAfterAsk(t, f, s, set, "cancelled by bob")
	checkClosedOnce(t, f, s, set, q, answers, "cancelled by bob")
}

func TestTimedOutQuestionCommentUpdatedAndReplyToldClosedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	set := surfacetest.SingleChoice("timed-out")
	q, answers := closeAfterAsk(t, f, s, set, "timed out: no answer within 4m0s (on_timeout: fail)")
	checkClosedOnce(t, f, s, set, q, answers, "timed out: no answer within 4m0s (on_timeout: fail)")
	// The store's answer given later (a default on timeout) does not
	// overwrite what the comment shows.
	c, _ := f.srv.Comment(testRepo, q)
	if err := s.Resolve(ctxTimeout(t), set, questions.Response{SetID: set.ID, By: "nobody", Surface: "timeout",
		Answers: []questions.Answer{surfacetest.Choose(set.Questions[0], "Postgres")}}); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if after, _ := f.srv.Comment(testRepo, q); after.Body != c.Body {
		t.Errorf("Resolve after the close edited the comment: %q", after.Body)
	}
}

// A reply naming a closed question while another question waits on the
// same issue is told the question is closed, and not offered to the other.
func TestReplyToClosedQuestionNotOfferedToAnother(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	dead := surfacetest.SingleChoice("dead")
	closeAfterAsk(t, f, s, dead, "cancelled by bob")
	live := surfacetest.SingleChoice("live")
	liveAnswers := pending(live)
	ch := startAskWith(ctxTimeout(t), s, live, liveAnswers)
	f.waitAsked(t, live)

	f.srv.AddComment(testRepo, 1, "alice", "/answer "+dead.Questions[0].ID+" 2")
	f.srv.WaitFor(t, waitLong, "closed notice", func() bool { return f.count("this question is closed") == 1 })
	notReturned(t, ch, f)
	if offers := liveAnswers.Offers(live.ID); len(offers) != 0 {
		t.Errorf("a reply to the closed question was offered to the live one: %+v", offers)
	}
	f.srv.AddComment(testRepo, 1, "alice", "3")
	if r := waitResult(t, ch); r.err != nil || !slices.Equal(r.resp.Answers[0].Labels, []string{"MySQL"}) {
		t.Fatalf("Ask(live) = %+v, %v; want MySQL", r.resp, r.err)
	}
}

// A run's own issue is closed when the run ends, with one final comment,
// whatever the number of calls; a fixed issue, or LeaveIssueOpen, stays
// open.
func TestRunIssueClosedWhenRunEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(0))
	set := surfacetest.SingleChoice("run-end")
	ch := startAsk(ctxTimeout(t), s, set)
	q := f.waitAsked(t, set)
	f.srv.AddComment(testRepo, q.Issue, "alice", "1")
	if r := waitResult(t, ch); r.err != nil {
		t.Fatalf("Ask = %v", r.err)
	}
	end := surfaces.RunProgress{RunID: set.RunID, Step: "done", Final: true, CostUSD: 0.0123, Summary: "Added the table. cc @octocat <!-- orchestrator:x -->"}
	for range 2 {
		if err := s.RunEnded(ctxTimeout(t), end); err != nil {
			t.Fatalf("RunEnded: %v", err)
		}
	}
	is := issueNumbered(t, f, q.Issue)
	if is.State != "closed" || is.StateReason != "completed" {
		t.Errorf("run issue state %q (%q), want closed (completed)", is.State, is.StateReason)
	}
	var finals []string
	for _, c := range f.srv.Comments(testRepo, q.Issue) {
		if strings.Contains(c.Body, "The run done") {
			finals = append(finals, c.Body)
		}
	}
	if len(finals) != 1 {
		t.Fatalf("%d final comments, want 1: %q", len(finals), finals)
	}
	if !strings.Contains(finals[0], "✅") || !strings.Contains(finals[0], "$0.0123") || !strings.Contains(finals[0], "Added the table.") ||
		strings.Contains(finals[0], "@octocat") || strings.Contains(finals[0], "orchestrator:x") {
		t.Errorf("final comment = %q", finals[0])
	}
	if is := issueNumbered(t, f, 1); is.State == "closed" {
		t.Errorf("the fixed issue was closed")
	}

	// Failed, and kept open by configuration.
	cfg := f.config(0)
	cfg.LeaveIssueOpen = true
	open := f.surface(t, cfg)
	set2 := surfacetest.SingleChoice("run-end-open")
	ch2 := startAsk(ctxTimeout(t), open, set2)
	q2 := f.waitAsked(t, set2)
	f.srv.AddComment(testRepo, q2.Issue, "alice", "1")
	waitResult(t, ch2)
	if err := open.RunEnded(ctxTimeout(t), surfaces.RunProgress{RunID: set2.RunID, Step: "failed", Final: true}); err != nil {
		t.Fatalf("RunEnded: %v", err)
	}
	if is := issueNumbered(t, f, q2.Issue); is.State == "closed" {
		t.Errorf("issue closed with LeaveIssueOpen")
	}
	// A run that never asked has no issue to close.
	if err := s.RunEnded(ctxTimeout(t), surfaces.RunProgress{RunID: "run-never-asked", Step: "failed", Final: true}); err != nil {
		t.Fatalf("RunEnded without an issue: %v", err)
	}
	if n := len(f.srv.Issues(testRepo)); n != 3 {
		t.Errorf("%d issues, want 3", n)
	}
}

// Opening the run's issue is idempotent: responses lost several times in a
// row, and a failed look-up after one, still open one issue.
func TestRunIssueOpenedOnceWhenResponsesLostRepeatedly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for range 3 {
		f.srv.LoseResponse("POST", "/repos/"+testRepo+"/issues", http.StatusBadGateway)
	}
	f.srv.Fail("GET", "/repos/"+testRepo+"/issues", http.StatusServiceUnavailable, http.Header{}, `{"message":"unavailable"}`)
	s := f.surface(t, f.config(0))
	set := surfacetest.SingleChoice("lost-issue-3")
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

func issueNumbered(t *testing.T, f *fixture, n int) githubtestIssue {
	t.Helper()
	for _, is := range f.srv.Issues(testRepo) {
		if is.Number == n {
			return is
		}
	}
	t.Fatalf("no issue %d", n)
	return githubtestIssue{}
}

// A maintainer's reply that tries to answer the only waiting question but
// matches no option gets one reply listing the valid options, and the
// question stays open; a reply that does not look like an answer gets none.
func TestNearMissAnswerGetsValidOptions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	set := surfacetest.SingleChoice("near-miss")
	answers := pending(set)
	ledger := newStoreLedger(answers)
	cfg := f.config(1)
	cfg.Ledger = ledger
	s := f.surface(t, cfg)
	ch := startAskWith(ctxTimeout(t), s, set, answers)
	f.waitAsked(t, set)

	talk := f.srv.AddComment(testRepo, 1, "alice", "sounds good to me")
	miss := f.srv.AddComment(testRepo, 1, "alice", "postgress")
	eventually(t, "near miss decided", func() bool {
		d, _ := ledger.CommentDecision(context.Background(), commentKey(testRepo, miss))
		return d == decInvalid
	})
	if d, _ := ledger.CommentDecision(context.Background(), commentKey(testRepo, talk)); d != decDiscussion {
		t.Errorf("discussion decided %q, want %q", d, decDiscussion)
	}
	f.waitPolls(t, 3)
	if n := f.count("could not be read"); n != 1 {
		t.Fatalf("%d invalid-answer replies, want exactly one", n)
	}
	var reply string
	for _, c := range f.srv.Comments(testRepo, 1) {
		if strings.Contains(c.Body, "could not be read") {
			reply = c.Body
		}
	}
	for _, want := range []string{"@alice", "`Postgres`", "`SQLite`", "`MySQL`", "`1`", "answer with an option number", "reply again"} {
		if !strings.Contains(reply, want) {
			t.Errorf("reply %q does not contain %q", reply, want)
		}
	}
	if n := len(f.srv.Comments(testRepo, 1)); n != 4 {
		t.Errorf("%d comments on the issue, want the question, the two replies and one notice", n)
	}
	notReturned(t, ch, f)
	f.srv.AddComment(testRepo, 1, "alice", "Postgres")
	if r := waitResult(t, ch); r.err != nil || !slices.Equal(r.resp.Answers[0].Labels, []string{"Postgres"}) {
		t.Fatalf("Ask = %+v, %v; want Postgres", r.resp, r.err)
	}
}
