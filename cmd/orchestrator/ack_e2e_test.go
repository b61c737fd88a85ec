package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestGitHubAnswerWhileDownAcknowledged: the process asking on GitHub dies
// (kill -9); a maintainer answers while no process runs; `serve` takes the
// run up, finds the answer, and acknowledges it as it would live: the
// question comment names who answered, the answer gets 👀 and, once the
// session resumed with it, 🚀 — although the runner ends the surface's Ask
// as soon as the store has the answer.
func TestGitHubAnswerWhileDownAcknowledged(t *testing.T) {
	t.Parallel()
	e, gh, repo, issue := githubE2E(t, fmt.Sprintf("\nspecs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n", filepath.Join(t.TempDir(), "no-specs")))
	cmd := e.child("", "", "run", "--surface", "github", "--prompt", "Implement spec X")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	q := gh.WaitQuestion(t, repo, 1, 2*time.Minute)
	cmd.Process.Kill()
	cmd.Wait()
	answer := gh.AddComment(repo, issue, "alice", "2") // nobody runs

	startServe(t, e)
	st := e.store()
	waitFor(t, "serve to finish the run", func() bool {
		runs, err := st.ListRuns(context.Background(), store.RunFilter{})
		return err == nil && len(runs) == 1 && runs[0].Status == store.RunDone
	})
	defer func() {
		if t.Failed() {
			for _, c := range gh.Comments(repo, issue) {
				t.Logf("comment %d by %s reactions %+v:\n%s", c.ID, c.Login, c.Reactions, c.Body)
			}
		}
	}()
	gh.WaitFor(t, time.Minute, "the question marked answered by alice, 👀 and 🚀 on the answer", func() bool {
		c, _ := gh.Comment(repo, answer)
		qc, _ := gh.Comment(repo, q.ID)
		var reactions []string
		for _, r := range c.Reactions {
			reactions = append(reactions, r.Content)
		}
		r := strings.Join(reactions, ",")
		return strings.Contains(r, "eyes") && strings.Contains(r, "rocket") && strings.Contains(qc.Body, "Answered by @") && strings.Contains(qc.Body, "alice:** JWT")
	})
	if n := e.answerRequests(); n != 1 {
		t.Errorf("answers sent %d times, want 1", n)
	}
	if qs := gh.Questions(repo); len(qs) != 1 {
		t.Errorf("question posted %d times, want once", len(qs))
	}
}
