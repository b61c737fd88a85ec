package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

// TestRunGitHub502OnPostingPostsQuestionOnce: GitHub answers the question's
// POST with a 502 after creating the comment (the response is lost). `run`
// does not fail: it finds the comment by its marker instead of posting it
// again, the answer is taken and the session resumes with it.
func TestRunGitHub502OnPostingPostsQuestionOnce(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	gh := githubtest.NewServer(t)
	gh.RequireToken("test-token")
	gh.SetPermission("alice", "write")
	const repo = "acme/app"
	issue := gh.CreateIssue(repo, "Nightly tasks")
	gh.LoseResponse("POST", fmt.Sprintf("/repos/%s/issues/%d/comments", repo, issue), http.StatusBadGateway)
	e.writeConfig(fmt.Sprintf("  github:\n    enabled: true\n    base_url: %q\n    token: test-token\n    repo: %s\n    issue: %d\n    poll_interval: 100ms\n",
		gh.URL()+"/", repo, issue))

	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out, _ := e.run("", "run", "--surface", "github", "--prompt", "Implement spec X")
		done <- result{code, out}
	}()
	gh.WaitQuestion(t, repo, 1, 2*time.Minute)
	gh.AddComment(repo, issue, "alice", "2")
	var res result
	select {
	case res = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the run did not finish")
	}
	if res.code != 0 || !strings.Contains(res.out, "Implemented with JWT.") {
		t.Fatalf("run: exit %d", res.code)
	}
	if n := e.answerRequests(); n != 1 {
		t.Fatalf("answers sent %d times", n)
	}
	if qs := gh.Questions(repo); len(qs) != 1 {
		t.Errorf("question posted %d times, want once", len(qs))
	}
}
