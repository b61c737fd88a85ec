package github

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// safetyNetClient is a client of f's fake with the webhook and the poll
// both on, polling only while poll says so.
func safetyNetClient(t *testing.T, f *fixture, h TriggerHandler, secret string, poll *atomic.Bool) *Client {
	t.Helper()
	cfg := f.config(1).ClientConfig
	cfg.WebhookSecret = secret
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.StartTriggers(context.Background(), TriggerConfig{Repos: []string{testRepo}, Mention: "@orchestrator",
		Labels: []string{"orchestrator"}, Handler: h, Poll: true, Leading: poll.Load}); err != nil {
		t.Fatal(err)
	}
	return c
}

// commentListings counts the requests listing the repository's issue
// comments (the trigger poll's).
func commentListings(f *fixture) int {
	n := 0
	for _, r := range f.srv.Requests() {
		if r.Method == "GET" && r.Path == "/repos/"+testRepo+"/issues/comments" {
			n++
		}
	}
	return n
}

// TestTriggerWebhookFailureIsTakenByThePoll: a comment delivered by
// webhook whose handling fails after the 202 (the permission lookup)
// starts nothing then, and the poll, kept on with the webhook as its
// safety net, turns it into one run.
func TestTriggerWebhookFailureIsTakenByThePoll(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	f := newFixture(t)
	h := &countingTriggers{TriggerHandler: newMemTriggers()}
	mem := h.TriggerHandler.(*memTriggers)
	var poll atomic.Bool // the poll waits until the webhook's take failed
	c := safetyNetClient(t, f, h, secret, &poll)
	issue := f.srv.OpenIssue(testRepo, "bob", "Flaky", "")
	cm := f.srv.AddComment(testRepo, issue, "alice", "@orchestrator fix it")
	perm := "/repos/" + testRepo + "/collaborators/alice/permission"
	// A 4xx: the transport does not try it again (a 5xx it would), so the
	// webhook's take fails for good.
	f.srv.Fail("GET", perm, http.StatusUnprocessableEntity, nil, `{"message":"Validation Failed"}`)
	if code := deliver(t, c, secret, "issue_comment", "d1", f.srv.IssueCommentEvent(testRepo, cm, "created")); code != http.StatusAccepted {
		t.Fatalf("delivery: status %d, want 202", code)
	}
	f.srv.WaitFor(t, waitLong, "the webhook's failed permission lookup", func() bool {
		for _, r := range f.srv.Requests() {
			if r.Path == perm && r.Status == http.StatusUnprocessableEntity {
				return true
			}
		}
		return false
	})
	if n := len(mem.runs()); n != 0 {
		t.Fatalf("runs %d after the failed lookup, want 0", n)
	}
	poll.Store(true)
	f.srv.WaitFor(t, waitLong, "the run, by the poll", func() bool { return len(mem.runs()) == 1 })
	// Polls after it take nothing more.
	seen := commentListings(f)
	f.srv.WaitFor(t, waitLong, "two more polls", func() bool { return commentListings(f) >= seen+2 })
	c.Close()
	if runs := mem.runs(); len(runs) != 1 || runs[0].CommentID != cm || runs[0].Key != "github:acme/app:comment:"+itoa64(cm) {
		t.Fatalf("runs %+v, want one of comment %d", runs, cm)
	}
	if got := f.srv.Reactions(testRepo, cm); len(got) != 1 || got[0] != "eyes" {
		t.Errorf("reactions %v, want one eyes", got)
	}
}

// TestTriggerWebhookAndPollOfOneCommentIsOneRun: a comment the webhook
// delivers and the poll lists too (the poll runs with the webhook) is
// handed to the handler by both, and starts one run with one 👀; a
// stranger's gets one reply.
func TestTriggerWebhookAndPollOfOneCommentIsOneRun(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	f := newFixture(t)
	h := &countingTriggers{TriggerHandler: newMemTriggers()}
	mem := h.TriggerHandler.(*memTriggers)
	var poll atomic.Bool
	c := safetyNetClient(t, f, h, secret, &poll)
	issue := f.srv.OpenIssue(testRepo, "bob", "Login", "")
	cm := f.srv.AddComment(testRepo, issue, "alice", "@orchestrator run login")
	stranger := f.srv.AddComment(testRepo, issue, "mallory", "@orchestrator run login")
	deliver(t, c, secret, "issue_comment", "d1", f.srv.IssueCommentEvent(testRepo, cm, "created"))
	deliver(t, c, secret, "issue_comment", "d2", f.srv.IssueCommentEvent(testRepo, stranger, "created"))
	f.srv.WaitFor(t, waitLong, "the webhook's run and reply", func() bool {
		return len(mem.runs()) == 1 && len(repliesOn(f, issue)) == 1
	})
	poll.Store(true)
	// Two listings after the poll began: the first poll's takes are done.
	seen := commentListings(f)
	f.srv.WaitFor(t, waitLong, "two polls", func() bool { return commentListings(f) >= seen+2 })
	c.Close()
	if n := h.n.Load(); n < 2 {
		t.Errorf("the handler was asked %d times, want the webhook's and the poll's (2)", n)
	}
	if runs := mem.runs(); len(runs) != 1 || runs[0].CommentID != cm {
		t.Fatalf("runs %+v, want one of comment %d", runs, cm)
	}
	if got := f.srv.Reactions(testRepo, cm); len(got) != 1 || got[0] != "eyes" {
		t.Errorf("reactions %v, want one eyes", got)
	}
	if r := repliesOn(f, issue); len(r) != 1 || !strings.Contains(r[0].Body, "@mallory") {
		t.Errorf("replies %+v, want one to mallory", r)
	}
}
