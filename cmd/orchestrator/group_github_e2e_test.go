package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

// TestGitHubAnswerAllOnlyWherePermitted: serve runs two specs, each asking
// on an issue of its own repository, the same question (the real CLI).
// bob, with write access to the first repository only, replies
// `/answer QID 2 --all` there: only that run is answered, and the reply
// names the other run as left waiting for lack of access. alice answers
// that one on its own issue. Then two new runs of the same specs wait on
// the question again, and carol, with write access to both, answers them
// both with one `--all` reply: each run resumes exactly once, the other
// issue's question shows the answer, and both decision logs name the
// shared decision and the other run.
func TestGitHubAnswerAllOnlyWherePermitted(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	gh := githubtest.NewServer(t)
	gh.RequireToken("test-token")
	gh.SetPermission("alice", "write")
	gh.SetRepoPermission("acme/a", "bob", "write")
	gh.SetRepoPermission("acme/a", "carol", "write")
	gh.SetRepoPermission("acme/b", "carol", "write")
	issueA, issueB := gh.CreateIssue("acme/a", "Nightly a"), gh.CreateIssue("acme/b", "Nightly b")
	specs := filepath.Join(e.dir, "specs")
	if err := os.MkdirAll(specs, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, where := range map[string]string{"nightly-a": fmt.Sprintf("acme/a, issue: %d", issueA), "nightly-b": fmt.Sprintf("acme/b, issue: %d", issueB)} {
		body := fmt.Sprintf("---\nname: %s\nsurfaces: [{github: {repo: %s}}]\n---\nImplement spec X\n", name, where)
		if err := os.WriteFile(filepath.Join(specs, name+".md"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.writeConfig(fmt.Sprintf("  github:\n    enabled: true\n    base_url: %q\n    token: test-token\n    repo: acme/a\n    issue: %d\n    poll_interval: 100ms\nspecs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n",
		gh.URL()+"/", issueA, specs))
	startServe(t, e)
	st := e.store()
	ctx := context.Background()
	defer func() {
		if t.Failed() {
			for repo, issue := range map[string]int{"acme/a": issueA, "acme/b": issueB} {
				for _, c := range gh.Comments(repo, issue) {
					t.Logf("%s#%d comment %d by %s:\n%s", repo, issue, c.ID, c.Login, c.Body)
				}
			}
		}
	}()
	// submit runs the spec under serve and returns the run's pending set.
	submit := func(name string) (string, store.SetRecord) {
		t.Helper()
		code, out, _ := e.run("", "submit", name)
		if code != 0 {
			t.Fatalf("submit %s: exit %d", name, code)
		}
		id := strings.TrimSpace(out)
		var rec store.SetRecord
		waitFor(t, "run "+id+" waiting on its question", func() bool {
			sets, _ := st.OpenSets(ctx, id)
			if len(sets) == 1 && sets[0].State == store.SetPending {
				rec = sets[0]
				return true
			}
			return false
		})
		return id, rec
	}
	done := func(id string) {
		t.Helper()
		waitFor(t, "run "+id+" done", func() bool {
			r, err := st.Run(ctx, id)
			return err == nil && r.Status == store.RunDone
		})
	}
	comment := func(repo string, issue int, has ...string) githubtest.Comment {
		t.Helper()
		var found githubtest.Comment
		gh.WaitFor(t, 2*time.Minute, fmt.Sprintf("a comment on %s#%d with %q", repo, issue, has), func() bool {
			for _, c := range gh.Comments(repo, issue) {
				ok := true
				for _, h := range has {
					ok = ok && strings.Contains(c.Body, h)
				}
				if ok {
					found = c
					return true
				}
			}
			return false
		})
		return found
	}

	// bob may answer in acme/a only.
	a1, setA1 := submit("nightly-a")
	b1, _ := submit("nightly-b")
	comment("acme/a", issueA, "Which auth method?")
	comment("acme/b", issueB, "Which auth method?", "This question also waits in 1 other run: nightly-a (run "+a1+").", "--all")
	gh.AddComment("acme/a", issueA, "bob", fmt.Sprintf("/answer %s 2 --all", setA1.Set.Questions[0].ID))
	done(a1)
	comment("acme/a", issueA, "@bob your answer was taken here.", "Not answered", "nightly-b (run "+b1+") (no write access to acme/b)")
	if r, err := st.Run(ctx, b1); err != nil || r.Status != store.RunWaiting {
		t.Fatalf("run %s: %s, %v; want it still waiting (bob may not answer in acme/b)", b1, r.Status, err)
	}
	gh.AddComment("acme/b", issueB, "alice", "2")
	done(b1)
	if n := e.answerRequests(); n != 2 {
		t.Fatalf("the answers reached the model %d times, want 2", n)
	}

	// carol may answer in both.
	a2, setA2 := submit("nightly-a")
	b2, setB2 := submit("nightly-b")
	comment("acme/a", issueA, setA2.Set.Questions[0].ID)
	comment("acme/b", issueB, setB2.Set.Questions[0].ID)
	gh.AddComment("acme/a", issueA, "carol", fmt.Sprintf("/answer %s 2 --all", setA2.Set.Questions[0].ID))
	done(a2)
	done(b2)
	if n := e.answerRequests(); n != 4 {
		t.Fatalf("the answers reached the model %d times, want 4 (each run once)", n)
	}
	comment("acme/a", issueA, "@carol your answer was taken here and in 1 other run (shared decision", "nightly-b (run "+b2+")")
	comment("acme/b", issueB, "Answered by @", "carol")
	for _, c := range []struct{ run, setID, other, spec string }{{a2, setA2.Set.ID, b2, "nightly-b"}, {b2, setB2.Set.ID, a2, "nightly-a"}} {
		rec, err := st.QuestionSet(ctx, c.setID)
		if err != nil || rec.Response.By != "@carol" || rec.Response.Surface != "github" {
			t.Errorf("set %s: %+v, %v; want answered by @carol on github", c.setID, rec.Response, err)
		}
		code, out, _ := e.run("", "show", c.run)
		if code != 0 || !strings.Contains(out, "also answered in run "+c.other+" of spec "+c.spec) || !strings.Contains(out, "shared decision g") {
			t.Errorf("show %s does not name the shared decision covering %s:\n%s", c.run, c.other, out)
		}
	}
}
