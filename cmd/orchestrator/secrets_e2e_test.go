package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// These tests run a model that writes a secret, or a file over
// git.max_file_size, into its worktree next to an ordinary change: the
// delivery pushes nothing and the run asks whether to deliver without those
// files or to stop; the question names the file, the line and the kind of
// secret, and nothing the orchestrator writes holds the secret's value.

// leakToken is a GitHub-token-shaped value, made at test time; leakAWS an
// AWS-secret-key-shaped one.
func leakToken() string { return "ghp" + "_" + strings.Repeat("Zq8wX", 7) + "m" }
func leakAWS() string   { return strings.Repeat("kR7/tW2+", 5) }

// leakRules: "Leak spec T" writes config.env with a GitHub token on its
// line 2 and an AWS secret key on its line 3, and ok.txt; "Leak spec B" writes big.bin (2 KiB) and ok.txt. Then the model
// is done.
func leakRules() []fakeapi.Rule {
	write := func(cmd string) fakeapi.Reply {
		return fakeapi.Reply{Text: "Writing the files.", ToolUse: &fakeapi.ToolUse{Name: "Bash",
			Input: map[string]any{"command": cmd + " && echo ordinary > ok.txt && echo wrote-the-files", "description": "Write the files"}}}
	}
	return []fakeapi.Rule{
		{When: "Leak spec T", Reply: write(fmt.Sprintf("printf 'MODE=prod\\nGITHUB_TOKEN=%s\\nAWS_SECRET_ACCESS_KEY=%s\\n' > config.env", leakToken(), leakAWS()))},
		{When: "Leak spec B", Reply: write("yes x | head -c 2048 > big.bin")},
		{When: "wrote-the-files", Reply: fakeapi.Reply{Text: "Wrote the files."}},
	}
}

// noLeak fails t when s holds a secret's value, or the start of one (an
// output that cut a line at its width).
func noLeak(t *testing.T, where, s string) {
	t.Helper()
	if strings.Contains(s, leakToken()[:12]) || strings.Contains(s, leakAWS()[:12]) {
		t.Errorf("%s holds a secret's value", where)
	}
}

// wantNothingPushed: origin has no branch of a run, and no PR was opened.
func (g *gitE2E) wantNothingPushed(t *testing.T) {
	t.Helper()
	if out := gitCmd(t, g.origin, "branch", "--list", "orchestrator/*"); out != "" {
		t.Fatalf("branches pushed: %s", out)
	}
	if n := len(g.gh.Pulls(deliveryRepo)); n != 0 {
		t.Fatalf("%d pull requests, want none", n)
	}
}

// wantStoreClean: no row the orchestrator wrote about the run (the run,
// its question sets, its decision log) holds the token.
func (g *gitE2E) wantStoreClean(t *testing.T, runID string) {
	t.Helper()
	ctx := context.Background()
	st := g.store()
	run, err := st.Run(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	noLeak(t, "the run's row", fmt.Sprintf("%+v", run))
	sets, _ := st.QuestionSets(ctx, store.SetFilter{RunID: runID})
	b, _ := json.Marshal(sets)
	noLeak(t, "the question sets", string(b))
	log, _ := st.DecisionLog(ctx, runID)
	noLeak(t, "the decision log", fmt.Sprintf("%+v", log))
}

// TestSecretInTheWorkAsksBeforeDelivery: the model writes a GitHub token
// into config.env and an ordinary file; nothing is pushed, the question on
// GitHub names config.env, line 2 and "GitHub token" and not the token.
// "Deliver without them" pushes the rest (ok.txt, not config.env) and the
// pull request's decision log says so; "Stop" stops the run, nothing
// pushed.
func TestSecretInTheWorkAsksBeforeDelivery(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, answer string
	}{{"deliver without", "1"}, {"stop", "2"}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newGitE2EWith(t, leakRules()...)
			spec := g.spec("leak", "Leak spec T", "")
			type result struct {
				code     int
				out, err string
			}
			done := make(chan result, 1)
			go func() {
				code, out, errs := g.run("", "run", "--surface", "github", spec)
				done <- result{code, out, errs}
			}()
			q := g.gh.WaitQuestion(t, deliveryRepo, 1, 2*time.Minute)
			for _, want := range []string{"config.env line 2: GitHub token", "config.env line 3: AWS secret access key", "Deliver without this file",
				"Deliver without them", "Stop", "Nothing was pushed"} {
				if !strings.Contains(q.Body, want) {
					t.Errorf("the question lacks %q:\n%s", want, q.Body)
				}
			}
			noLeak(t, "the question on GitHub", q.Body)
			g.wantNothingPushed(t)
			sets, err := g.store().QuestionSets(context.Background(), store.SetFilter{State: []store.SetState{store.SetPending}})
			if err != nil || len(sets) != 1 || sets[0].Set.Kind != questions.KindSecrets {
				t.Fatalf("pending sets = %+v, %v; want one of kind secrets", sets, err)
			}

			g.gh.AddComment(deliveryRepo, q.Issue, "maint", c.answer)
			var res result
			select {
			case res = <-done:
			case <-time.After(3 * time.Minute):
				t.Fatal("the run did not finish")
			}
			noLeak(t, "the run's output", res.out+res.err)
			run := g.onlyRun()
			g.wantStoreClean(t, run.ID)
			for _, cm := range g.gh.Comments(deliveryRepo, q.Issue) {
				noLeak(t, "a comment on GitHub", cm.Body)
			}
			dl, _, _ := g.store().Delivery(context.Background(), run.ID)
			if c.answer == "2" {
				if res.code != exitStopped || run.Status != store.RunStopped || !strings.Contains(run.Error, "nothing was pushed") {
					t.Fatalf("run: exit %d, %s %q", res.code, run.Status, run.Error)
				}
				g.wantNothingPushed(t)
				if b, err := os.ReadFile(filepath.Join(dl.Worktree, "config.env")); err != nil || !strings.Contains(string(b), "GITHUB_TOKEN=") {
					t.Fatalf("the stopped run's worktree lost config.env: %v", err)
				}
				return
			}
			if res.code != 0 || run.Status != store.RunDone {
				t.Fatalf("run: exit %d, %s %q", res.code, run.Status, run.Error)
			}
			if files := gitCmd(t, g.origin, "ls-tree", "-r", "--name-only", dl.Branch); files != "README.md\nok.txt" {
				t.Fatalf("pushed tree = %q, want README.md and ok.txt", files)
			}
			noLeak(t, "origin's history", gitCmd(t, g.origin, "log", "-p", "--all"))
			prs := g.gh.Pulls(deliveryRepo)
			if len(prs) != 1 {
				t.Fatalf("%d pull requests, want 1", len(prs))
			}
			noLeak(t, "the pull request", prs[0].Title+prs[0].Body)
			for _, want := range []string{"config.env line 2: GitHub token", "Deliver without them", "@maint"} {
				if !strings.Contains(prs[0].Body, want) {
					t.Errorf("the pull request's body lacks %q:\n%s", want, prs[0].Body)
				}
			}
		})
	}
}

// TestOversizedFileAsksBeforeDelivery: with git.max_file_size 1KiB, a 2 KiB
// file is held back the same way; the spec's preset answers "Deliver
// without them", and the rest is pushed.
func TestOversizedFileAsksBeforeDelivery(t *testing.T) {
	t.Parallel()
	g := newGitE2EWith(t, leakRules()...)
	g.writeConfig(fmt.Sprintf("  github:\n    enabled: true\n    base_url: %q\n    token: test-token\n    repo: %s\n    poll_interval: 100ms\n\ngit:\n  max_file_size: 1KiB\n",
		g.gh.URL()+"/", deliveryRepo))
	spec := g.spec("big", "Leak spec B", "answers:\n  Secrets: Deliver without them\n")
	code, _, errs := g.run("", "run", "--surface", "terminal", spec)
	if code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	if !strings.Contains(errs, "big.bin: file over the size limit (2 KiB, limit 1 KiB)") {
		t.Errorf("the log does not say what was held back")
	}
	run := g.onlyRun()
	dl, _, _ := g.store().Delivery(context.Background(), run.ID)
	if files := gitCmd(t, g.origin, "ls-tree", "-r", "--name-only", dl.Branch); files != "README.md\nok.txt" {
		t.Fatalf("pushed tree = %q, want README.md and ok.txt", files)
	}
	prs := g.gh.Pulls(deliveryRepo)
	if len(prs) != 1 || !strings.Contains(prs[0].Body, "big.bin: file over the size limit") || !strings.Contains(prs[0].Body, "Deliver without them") {
		t.Fatalf("pull requests = %+v", prs)
	}
}

// TestSecretQuestionWaitsAcrossARestart: the process that asked is killed
// while the question waits; a maintainer answers on GitHub meanwhile;
// `resume` finds the question already asked, takes the answer and delivers
// without config.env.
func TestSecretQuestionWaitsAcrossARestart(t *testing.T) {
	t.Parallel()
	g := newGitE2EWith(t, leakRules()...)
	spec := g.spec("leak", "Leak spec T", "")
	cmd := g.child("", "", "run", "--surface", "github", spec)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	q := g.gh.WaitQuestion(t, deliveryRepo, 1, 2*time.Minute)
	cmd.Process.Kill()
	cmd.Wait()
	run := g.onlyRun()
	if run.Status != store.RunWaiting {
		t.Fatalf("run after the kill: %s %q", run.Status, run.Error)
	}
	g.wantNothingPushed(t)
	g.gh.AddComment(deliveryRepo, q.Issue, "maint", "1")
	code, out, errs := g.run("", "resume", run.ID)
	if code != 0 {
		t.Fatalf("resume: exit %d", code)
	}
	noLeak(t, "the output of resume", out+errs)
	dl, _, _ := g.store().Delivery(context.Background(), run.ID)
	if files := gitCmd(t, g.origin, "ls-tree", "-r", "--name-only", dl.Branch); files != "README.md\nok.txt" {
		t.Fatalf("pushed tree = %q, want README.md and ok.txt", files)
	}
	if qs := g.gh.Questions(deliveryRepo); len(qs) != 1 {
		t.Fatalf("%d questions on GitHub, want the one asked before the restart", len(qs))
	}
}
