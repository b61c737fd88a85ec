package main

import (
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestRunAsksOnGitHub: `run --surface github` asks in an issue comment of a
// fake GitHub, a stranger's reply changes nothing, a reply by someone with
// write access answers, and the session resumes with it.
func TestRunAsksOnGitHub(t *testing.T) {
	t.Parallel()
	e, gh, repo, issue := githubE2E(t, "    progress: true\n")

	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errs := e.run("", "run", "--surface", "github", "--prompt", "Implement spec X")
		done <- result{code, out, errs}
	}()
	q := gh.WaitQuestion(t, repo, 1, 2*time.Minute)
	for _, want := range []string{"Which auth method?", "OAuth2", "JWT", "<!-- orchestrator:question"} {
		if !strings.Contains(q.Body, want) {
			t.Errorf("question comment lacks %q:\n%s", want, q.Body)
		}
	}
	gh.AddComment(repo, issue, "mallory", "1") // read access only: ignored
	answer := gh.AddComment(repo, issue, "alice", "2")
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
	defer func() {
		if t.Failed() {
			for _, c := range gh.Comments(repo, issue) {
				t.Logf("comment %d by %s reactions %+v:\n%s", c.ID, c.Login, c.Reactions, c.Body)
			}
		}
	}()
	gh.WaitFor(t, 20*time.Second, "👀 and 🚀 on the answer, and the question marked answered", func() bool {
		c, _ := gh.Comment(repo, answer)
		qc, _ := gh.Comment(repo, q.ID)
		var reactions []string
		for _, r := range c.Reactions {
			reactions = append(reactions, r.Content)
		}
		r := strings.Join(reactions, ",")
		return strings.Contains(r, "eyes") && strings.Contains(r, "rocket") && strings.Contains(qc.Body, "Answered by @") && strings.Contains(qc.Body, "alice:** JWT")
	})
	// The run's status comment ends with its summary.
	var status []string
	for _, c := range gh.Comments(repo, issue) {
		if strings.Contains(c.Body, "<!-- orchestrator:progress") {
			status = append(status, c.Body)
		}
	}
	if len(status) != 1 || !strings.Contains(status[0], "✅") || !strings.Contains(status[0], "Implemented with JWT.") {
		t.Fatalf("status comments = %q, want one, final, with the summary", status)
	}
	run := e.onlyRun()
	sets, _ := e.store().QuestionSets(t.Context(), store.SetFilter{RunID: run.ID})
	if len(sets) != 1 || sets[0].Response.By != "@alice" || sets[0].Response.Surface != "github" {
		t.Fatalf("stored answer: %+v", sets)
	}
}
