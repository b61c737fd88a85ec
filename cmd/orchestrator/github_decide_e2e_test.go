package main

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

// githubE2E is an end-to-end setup asking on issue 1 of acme/app on a fake
// GitHub where alice may answer; more is added to the github block.
func githubE2E(t *testing.T, more string) (e *e2e, gh *githubtest.Server, repo string, issue int) {
	t.Helper()
	e = newE2E(t, standardRules(0)...)
	gh = githubtest.NewServer(t)
	gh.RequireToken("test-token")
	gh.SetPermission("alice", "write")
	repo = "acme/app"
	issue = gh.CreateIssue(repo, "Nightly tasks")
	e.writeConfig(fmt.Sprintf("  github:\n    enabled: true\n    base_url: %q\n    token: test-token\n    repo: %s\n    issue: %d\n    poll_interval: 100ms\n%s",
		gh.URL()+"/", repo, issue, more))
	return e, gh, repo, issue
}

// TestRunGitHub502OnPostingPostsQuestionOnce: GitHub answers the question's
// POST with a 502 after creating the comment (the response is lost). `run`
// does not fail: it finds the comment by its marker instead of posting it
// again, the answer is taken and the session resumes with it.
func TestRunGitHub502OnPostingPostsQuestionOnce(t *testing.T) {
	t.Parallel()
	e, gh, repo, issue := githubE2E(t, "")
	gh.LoseResponse("POST", fmt.Sprintf("/repos/%s/issues/%d/comments", repo, issue), http.StatusBadGateway)

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

// TestRunGitHubTwoRunsBareReplyAfterRestart: two runs wait on one issue;
// both processes die; a bare "2" comes meanwhile. Resumed one after the
// other, neither run takes it (the bot says so once); "/answer QID 2"
// then answers one run, which finishes, and the other still waits.
func TestRunGitHubTwoRunsBareReplyAfterRestart(t *testing.T) {
	t.Parallel()
	e, gh, repo, issue := githubE2E(t, "")
	kill := func(cmd *exec.Cmd) {
		cmd.Process.Kill()
		cmd.Wait()
	}
	var first []*exec.Cmd
	for i := range 2 {
		cmd := e.child("", "", "run", "--surface", "github", "--prompt", "Implement spec X")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		first = append(first, cmd)
		gh.WaitQuestion(t, repo, i+1, 2*time.Minute)
	}
	for _, cmd := range first {
		kill(cmd)
	}
	gh.AddComment(repo, issue, "alice", "2")

	ctx := t.Context()
	st := e.store()
	runs, err := st.ListRuns(ctx, store.RunFilter{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs = %+v, %v; want two", runs, err)
	}
	which := func() int {
		n := 0
		for _, c := range gh.Comments(repo, issue) {
			if strings.Contains(c.Body, "several questions are waiting on this issue") {
				n++
			}
		}
		return n
	}
	polls := func() int {
		n := 0
		for _, r := range gh.Requests() {
			if r.Method == "GET" && r.Path == "/repos/"+repo+"/issues/comments" {
				n++
			}
		}
		return n
	}
	var resumed []*exec.Cmd
	for _, run := range runs {
		cmd := e.child("", "", "resume", run.ID)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		resumed = append(resumed, cmd)
		gh.WaitFor(t, time.Minute, "the bot's which-question reply", func() bool { return which() >= 1 })
	}
	// Both resumed processes have read the issue a few times.
	start := polls()
	gh.WaitFor(t, time.Minute, "polls", func() bool { return polls() >= start+10 })
	if n := which(); n != 1 {
		t.Errorf("%d which-question replies, want one", n)
	}
	for _, run := range runs {
		sets, _ := st.QuestionSets(ctx, store.SetFilter{RunID: run.ID})
		if len(sets) != 1 || sets[0].State != store.SetPending {
			t.Fatalf("run %s sets %+v; want its one set still pending after a bare reply", run.ID, sets)
		}
	}

	sets, _ := st.QuestionSets(ctx, store.SetFilter{RunID: runs[0].ID})
	gh.AddComment(repo, issue, "alice", "/answer "+sets[0].Set.Questions[0].ID+" 2")
	done := make(chan error, 1)
	go func() { done <- resumed[0].Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("resume of the answered run: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the answered run did not finish")
	}
	if got, _ := st.Run(ctx, runs[0].ID); got.Status != store.RunDone {
		t.Errorf("answered run is %s, want done", got.Status)
	}
	if got, _ := st.QuestionSets(ctx, store.SetFilter{RunID: runs[1].ID}); len(got) != 1 || got[0].State != store.SetPending {
		t.Errorf("the other run's set %+v, want still pending", got)
	}
	kill(resumed[1])
}
