package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

// githubRunIssueE2E is githubE2E with one issue per run (issue: 0).
func githubRunIssueE2E(t *testing.T) (e *e2e, gh *githubtest.Server, repo string) {
	t.Helper()
	e = newE2E(t, standardRules(0)...)
	gh = githubtest.NewServer(t)
	gh.RequireToken("test-token")
	gh.SetPermission("alice", "write")
	repo = "acme/app"
	gh.CreateIssue(repo, "Unrelated") // issue 1
	e.writeConfig(fmt.Sprintf("  github:\n    enabled: true\n    base_url: %q\n    token: test-token\n    repo: %s\n    issue: 0\n    labels: [orchestrator]\n    poll_interval: 100ms\n",
		gh.URL()+"/", repo))
	return e, gh, repo
}

type runResult struct {
	code     int
	out, err string
}

func waitRun(t *testing.T, done <-chan runResult) runResult {
	t.Helper()
	select {
	case res := <-done:
		return res
	case <-time.After(3 * time.Minute):
		t.Fatal("the run did not finish")
		return runResult{}
	}
}

func logComments(t *testing.T, gh *githubtest.Server, repo string, issue int) {
	if t.Failed() {
		for _, c := range gh.Comments(repo, issue) {
			t.Logf("comment %d by %s:\n%s", c.ID, c.Login, c.Body)
		}
	}
}

// TestRunIssueClosedAtTheEnd: an `issue: 0` run opens its own issue, a
// discussion comment there gets no reply, the answer is taken, and when
// the run ends its issue is closed with a final comment.
func TestRunIssueClosedAtTheEnd(t *testing.T) {
	t.Parallel()
	e, gh, repo := githubRunIssueE2E(t)
	done := make(chan runResult, 1)
	go func() {
		code, out, errs := e.run("", "run", "--surface", "github", "--prompt", "Implement spec X")
		done <- runResult{code, out, errs}
	}()
	q := gh.WaitQuestion(t, repo, 1, 2*time.Minute)
	defer logComments(t, gh, repo, q.Issue)
	if q.Issue == 1 {
		t.Fatalf("the question was asked on the unrelated issue")
	}
	gh.AddComment(repo, q.Issue, "alice", "Let me check with the team before we pick one.")
	time.Sleep(500 * time.Millisecond) // a few polls: read, and left alone
	gh.AddComment(repo, q.Issue, "alice", "2")
	res := waitRun(t, done)
	if res.code != 0 || !strings.Contains(res.out, "Implemented with JWT.") {
		t.Fatalf("run: exit %d\n%s\n%s", res.code, res.out, res.err)
	}
	var is githubtest.Issue
	for _, x := range gh.Issues(repo) {
		if x.Number == q.Issue {
			is = x
		}
	}
	if is.State != "closed" || is.StateReason != "completed" {
		t.Errorf("run issue #%d is %q (%q), want closed (completed)", q.Issue, is.State, is.StateReason)
	}
	cs := gh.Comments(repo, q.Issue)
	if len(cs) != 4 {
		t.Fatalf("%d comments on the run's issue, want the question, the discussion, the answer and the final comment (no reply to the discussion)", len(cs))
	}
	final := cs[3].Body
	if !strings.Contains(final, "✅ **The run done**") || !strings.Contains(final, "Implemented with JWT.") {
		t.Errorf("final comment = %q", final)
	}
	for _, x := range gh.Issues(repo) {
		if x.Number == 1 && x.State == "closed" {
			t.Errorf("the unrelated issue was closed")
		}
	}
}

// TestCancelClosesQuestionAndRunIssue: `cancel` of a run waiting on GitHub
// shows its question closed, and its own issue is closed with a final
// comment saying it was cancelled.
func TestCancelClosesQuestionAndRunIssue(t *testing.T) {
	t.Parallel()
	e, gh, repo := githubRunIssueE2E(t)
	done := make(chan runResult, 1)
	go func() {
		code, out, errs := e.run("", "run", "--surface", "github", "--prompt", "Implement spec X")
		done <- runResult{code, out, errs}
	}()
	q := gh.WaitQuestion(t, repo, 1, 2*time.Minute)
	defer logComments(t, gh, repo, q.Issue)
	run := e.onlyRun()
	if code, out, errs := e.run("", "cancel", run.ID); code != 0 {
		t.Fatalf("cancel: exit %d\n%s\n%s", code, out, errs)
	}
	waitRun(t, done)
	gh.WaitFor(t, 20*time.Second, "the question shown cancelled and the issue closed", func() bool {
		qc, _ := gh.Comment(repo, q.ID)
		closed := false
		for _, x := range gh.Issues(repo) {
			closed = closed || (x.Number == q.Issue && x.State == "closed" && x.StateReason == "not_planned")
		}
		return strings.Contains(qc.Body, "⛔ **Closed: cancelled by ") && closed
	})
	var finals int
	for _, c := range gh.Comments(repo, q.Issue) {
		if strings.Contains(c.Body, "⛔ **The run cancelled**") {
			finals++
		}
	}
	if finals != 1 {
		t.Errorf("%d final comments saying the run was cancelled, want 1", finals)
	}
}

// waitingGitHubRun starts a run asking on GitHub (its own issue) and stops
// its process once the question is posted (as Ctrl-C does): the run waits
// with no process driving it.
func waitingGitHubRun(t *testing.T) (e *e2e, gh *githubtest.Server, repo string, q githubtest.Comment) {
	t.Helper()
	e, gh, repo = githubRunIssueE2E(t)
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Dir: filepath.Join(e.dir, "work"),
		LookupEnv: func(string) (string, bool) { return "", false }}
	ctx, stop := context.WithTimeout(context.Background(), 3*time.Minute)
	defer stop()
	done := make(chan int, 1)
	go func() {
		done <- m.Exec(ctx, []string{"--config", e.config, "run", "--surface", "github", "--prompt", "Implement spec X"})
	}()
	q = gh.WaitQuestion(t, repo, 1, 2*time.Minute)
	stop()
	if code := <-done; code != exitCancelled || !strings.Contains(out.String(), "the run is still waiting") {
		t.Fatalf("run: exit %d, want %d and the run still waiting\n%s\n%s", code, exitCancelled, out.String(), errb.String())
	}
	if r := e.onlyRun(); r.Status != store.RunWaiting {
		t.Fatalf("run is %s, want waiting", r.Status)
	}
	return e, gh, repo, q
}

// TestCancelOfUndrivenRunClosesQuestionAndRunIssue: `cancel` of a run that
// no process drives (its `run` exited 3) shows its GitHub question closed
// and closes its own issue, as the process driving it would have.
func TestCancelOfUndrivenRunClosesQuestionAndRunIssue(t *testing.T) {
	t.Parallel()
	e, gh, repo, q := waitingGitHubRun(t)
	defer logComments(t, gh, repo, q.Issue)
	run := e.onlyRun()
	if code, out, errs := e.run("", "cancel", run.ID); code != 0 || strings.Contains(errs, "not updated") {
		t.Fatalf("cancel: exit %d\n%s\n%s", code, out, errs)
	}
	qc, _ := gh.Comment(repo, q.ID)
	if !strings.Contains(qc.Body, "⛔ **Closed: cancelled by ") {
		t.Errorf("the question comment is not shown cancelled:\n%s", qc.Body)
	}
	for _, x := range gh.Issues(repo) {
		if x.Number == q.Issue && (x.State != "closed" || x.StateReason != "not_planned") {
			t.Errorf("run issue #%d is %q (%q), want closed (not_planned)", q.Issue, x.State, x.StateReason)
		}
	}
	var finals int
	for _, c := range gh.Comments(repo, q.Issue) {
		if strings.Contains(c.Body, "⛔ **The run cancelled**") {
			finals++
		}
	}
	if finals != 1 {
		t.Errorf("%d final comments saying the run was cancelled, want 1", finals)
	}
	if r := e.onlyRun(); r.Status != store.RunCancelled {
		t.Errorf("run is %s, want cancelled", r.Status)
	}
}

// TestCancelOfUndrivenRunWithTokenUnset: with the GitHub token's variable
// unset, `cancel` of a run no process drives still cancels it, and says in
// one line that its question comments were not updated and why.
func TestCancelOfUndrivenRunWithTokenUnset(t *testing.T) {
	t.Parallel()
	e, gh, repo, q := waitingGitHubRun(t)
	e.writeConfig(fmt.Sprintf("  github:\n    enabled: true\n    base_url: %q\n    token: ${GITHUB_TOKEN}\n    repo: %s\n    issue: 0\n",
		gh.URL()+"/", repo))
	run := e.onlyRun()
	code, out, errs := e.run("", "cancel", run.ID)
	if code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("cancel: exit %d\n%s\n%s", code, out, errs)
	}
	if n := strings.Count(errs, "not updated"); n != 1 || !strings.Contains(errs, "GITHUB_TOKEN is not set") {
		t.Errorf("stderr says %d times that the questions were not updated (want once, naming GITHUB_TOKEN):\n%s", n, errs)
	}
	if r := e.onlyRun(); r.Status != store.RunCancelled {
		t.Errorf("run is %s, want cancelled", r.Status)
	}
	if qc, _ := gh.Comment(repo, q.ID); strings.Contains(qc.Body, "Closed") {
		t.Errorf("the question comment changed without a token:\n%s", qc.Body)
	}
}
