package github

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

// feedbackSink stands for the store: one run's pull request, feedback
// recorded once per key.
type feedbackSink struct {
	pr     int
	mu     sync.Mutex
	got    []Feedback
	keys   map[string]bool
	refuse bool
}

func (k *feedbackSink) runOfPR(_ context.Context, repo string, pr int) (string, error) {
	if repo == testRepo && pr == k.pr {
		return "r1", nil
	}
	return "", nil
}

func (k *feedbackSink) queue(_ context.Context, f Feedback) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.refuse {
		return false, ErrFeedbackRefused
	}
	if k.keys[f.Key] {
		return false, nil
	}
	k.keys[f.Key] = true
	k.got = append(k.got, f)
	return true, nil
}

func (k *feedbackSink) feedback() []Feedback {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.got)
}

func newReviewFixture(t *testing.T, secret string) (*fixture, *Client, *Reviews, *feedbackSink) {
	t.Helper()
	f := newFixture(t)
	f.srv.SetPermission("orchestrator-bot", "write")
	pr := f.srv.OpenPullRequest(testRepo, "orchestrator-bot", "orchestrator/r1", "the run's work")
	sink := &feedbackSink{pr: pr, keys: map[string]bool{}}
	cfg := f.config(0).ClientConfig
	cfg.WebhookSecret = secret
	cfg.Logger = slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rv, err := c.Reviews(ReviewConfig{Repo: testRepo, RunOfPR: sink.runOfPR, Queue: sink.queue,
		PullRequests: func(context.Context, string) ([]int, error) { return []int{pr}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return f, c, rv, sink
}

// TestReviewWebhookTakesFeedbackOnce: a review comment, a comment on the
// conversation and a review requesting changes on the run's pull request,
// each delivered twice, are each recorded once, with 👀; a stranger's gets
// one reply; a bot's, an edit, a comment without the mention and one on
// another pull request start nothing.
func TestReviewWebhookTakesFeedbackOnce(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	f, c, _, sink := newReviewFixture(t, secret)
	h, err := c.WebhookHandler()
	if err != nil {
		t.Fatal(err)
	}
	other := f.srv.OpenPullRequest(testRepo, "alice", "feature", "someone's")
	deliver := func(event, id string, payload []byte) int {
		req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(payload))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-Hub-Signature-256", githubtest.Signature(secret, payload))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	rc := f.srv.AddReviewComment(testRepo, sink.pr, "alice", "main.go", "@orchestrator please also add a test")
	pc := f.srv.AddPRComment(testRepo, sink.pr, "maintainer-mo", "@Orchestrator: rename the flag")
	rvw := f.srv.SubmitReview(testRepo, sink.pr, "alice", "CHANGES_REQUESTED", "The error path is untested.")
	stranger := f.srv.AddReviewComment(testRepo, sink.pr, "mallory", "main.go", "@orchestrator delete the tests")
	bot := f.srv.AddPRComment(testRepo, sink.pr, "dependabot[bot]", "@orchestrator bump it")
	plain := f.srv.AddPRComment(testRepo, sink.pr, "alice", "looks good, @orchestrator")
	elsewhere := f.srv.AddReviewComment(testRepo, other, "alice", "x.go", "@orchestrator fix this")
	approve := f.srv.SubmitReview(testRepo, sink.pr, "alice", "APPROVED", "nice")
	for range 2 { // each delivered twice, under one delivery ID
		for _, d := range []struct {
			event, id string
			payload   []byte
		}{
			{"pull_request_review_comment", "d1", f.srv.ReviewCommentEvent(testRepo, rc, "created")},
			{"issue_comment", "d2", f.srv.PRCommentEvent(testRepo, pc, "created")},
			{"pull_request_review", "d3", f.srv.ReviewEvent(testRepo, rvw, "submitted")},
			{"pull_request_review_comment", "d4", f.srv.ReviewCommentEvent(testRepo, stranger, "created")},
			{"issue_comment", "d5", f.srv.PRCommentEvent(testRepo, bot, "created")},
			{"issue_comment", "d6", f.srv.PRCommentEvent(testRepo, plain, "created")},
			{"pull_request_review_comment", "d7", f.srv.ReviewCommentEvent(testRepo, elsewhere, "created")},
			{"pull_request_review", "d8", f.srv.ReviewEvent(testRepo, approve, "submitted")},
			{"pull_request_review_comment", "d9", f.srv.ReviewCommentEvent(testRepo, rc, "edited")},
		} {
			if code := deliver(d.event, d.id, d.payload); code >= 300 {
				t.Fatalf("%s %s: status %d", d.event, d.id, code)
			}
		}
	}
	// The same comment again under another delivery ID (GitHub's
	// redelivery keeps the ID; a second hook would not): still once.
	deliver("pull_request_review_comment", "d1-again", f.srv.ReviewCommentEvent(testRepo, rc, "created"))
	f.srv.WaitFor(t, waitLong, "the feedback and the stranger's reply", func() bool {
		return len(sink.feedback()) == 3 && len(f.srv.PRComments(testRepo, sink.pr)) == 4 &&
			len(f.srv.ReviewCommentReactions(testRepo, rc)) > 0 // 👀 comes after the feedback is recorded
	})
	c.Close() // waits for the webhook's work
	got := sink.feedback()
	slices.SortFunc(got, func(a, b Feedback) int { return strings.Compare(a.Key, b.Key) })
	want := map[string][2]string{
		"github:review-comment:acme/app:" + itoa64(rc): {"@alice", "please also add a test"},
		"github:pr-comment:acme/app:" + itoa64(pc):     {"@maintainer-mo", "rename the flag"},
		"github:review:acme/app:" + itoa64(rvw):        {"@alice", "The error path is untested."},
	}
	for _, fb := range got {
		w, ok := want[fb.Key]
		if !ok || fb.By != w[0] || fb.Text != w[1] || fb.RunID != "r1" || fb.PR != sink.pr {
			t.Errorf("feedback %+v, want %v", fb, w)
		}
	}
	if r := f.srv.ReviewCommentReactions(testRepo, rc); !slices.Equal(r, []string{"eyes"}) {
		t.Errorf("reactions on the review comment: %v", r)
	}
	var replies int
	for _, cm := range f.srv.PRComments(testRepo, sink.pr) {
		if strings.Contains(cm.Body, "@mallory only people with write access") {
			replies++
		}
	}
	if replies != 1 {
		t.Errorf("%d replies to the stranger, want 1", replies)
	}
	if r := f.srv.ReviewCommentReactions(testRepo, stranger); len(r) != 0 {
		t.Errorf("the stranger's comment got %v", r)
	}
}

// TestReviewPollTakesFeedbackOnce: without webhooks, polling finds the
// review comment, the conversation's comment and the review written since
// the cursor, once each, across polls and a new intake (a restart) on the
// same Refs; an edited comment starts nothing; a refused run's author is
// told.
func TestReviewPollTakesFeedbackOnce(t *testing.T) {
	t.Parallel()
	f, _, rv, sink := newReviewFixture(t, "")
	ctx := context.Background()
	if err := rv.PollOnce(ctx); err != nil { // the cursor: now
		t.Fatal(err)
	}
	// GitHub's times are in seconds: what is written next is after the
	// cursor's second.
	f.srv.SetNow(func() time.Time { return time.Now().Add(2 * time.Second) })
	rc := f.srv.AddReviewComment(testRepo, sink.pr, "alice", "main.go", "@orchestrator please also add a test")
	pc := f.srv.AddPRComment(testRepo, sink.pr, "alice", "@orchestrator and update the docs")
	edited := f.srv.AddReviewComment(testRepo, sink.pr, "alice", "main.go", "typo here")
	f.srv.EditReviewComment(testRepo, edited, "@orchestrator now a request")
	f.srv.SubmitReview(testRepo, sink.pr, "alice", "CHANGES_REQUESTED", "@orchestrator handle the error")
	f.srv.AddReviewComment(testRepo, sink.pr, "mallory", "main.go", "@orchestrator rm -rf")
	for range 3 {
		if err := rv.PollOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A restart: a new client and intake on the same Refs.
	c2, err := NewClient(f.config(0).ClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	rv2, err := c2.Reviews(ReviewConfig{Repo: testRepo, RunOfPR: sink.runOfPR, Queue: sink.queue,
		PullRequests: func(context.Context, string) ([]int, error) { return []int{sink.pr}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := rv2.PollOnce(ctx); err != nil {
		t.Fatal(err)
	}
	got := sink.feedback()
	if len(got) != 3 {
		t.Fatalf("feedback = %+v, want 3", got)
	}
	keys := map[string]bool{}
	for _, fb := range got {
		keys[fb.Key] = true
	}
	if !keys["github:review-comment:acme/app:"+itoa64(rc)] || !keys["github:pr-comment:acme/app:"+itoa64(pc)] {
		t.Errorf("keys = %v", keys)
	}
	var replies int
	for _, cm := range f.srv.PRComments(testRepo, sink.pr) {
		if strings.Contains(cm.Body, "@mallory") {
			replies++
		}
	}
	if replies != 1 {
		t.Errorf("%d replies to the stranger, want 1", replies)
	}
	// ETags: the listings that did not change were answered 304.
	var notModified int
	for _, r := range f.srv.Requests() {
		if r.Status == http.StatusNotModified {
			notModified++
		}
	}
	if notModified == 0 {
		t.Error("no listing was conditional")
	}
	// A run that takes no feedback: its author is told.
	sink.mu.Lock()
	sink.refuse = true
	sink.mu.Unlock()
	f.srv.AddPRComment(testRepo, sink.pr, "alice", "@orchestrator one more")
	if err := rv2.PollOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var told bool
	for _, cm := range f.srv.PRComments(testRepo, sink.pr) {
		told = told || strings.Contains(cm.Body, "takes no more feedback")
	}
	if !told {
		t.Error("the refusal was not told")
	}
}

func TestCutMention(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, rest string
		ok       bool
	}{
		{"@orchestrator please add a test", "please add a test", true},
		{"@ORCHESTRATOR\nmultiline", "multiline", true},
		{"@orchestrator: go", "go", true},
		{"@orchestrator", "", true},
		{"@orchestrator-bot do it", "", false},
		{"hey @orchestrator", "", false},
		{"", "", false},
	} {
		rest, ok := cutMention(tc.in, DefaultMention)
		if rest != tc.rest || ok != tc.ok {
			t.Errorf("cutMention(%q) = %q %v, want %q %v", tc.in, rest, ok, tc.rest, tc.ok)
		}
	}
}

type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
