package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/delivery"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

// These tests deliver runs through git: real repositories in temporary
// directories (origin a local bare repository), the real CLI against the
// fake API, whose model asks which auth method, then writes auth.txt with
// its Bash tool, and the fake GitHub recording issues and pull requests.

// deliveryRules: "Implement spec X" asks; the answer makes the model write
// the chosen label to auth.txt with Bash; the tool's output ends the turn.
// "Check spec Y" changes nothing.
func deliveryRules() []fakeapi.Rule {
	return []fakeapi.Rule{
		{When: "Implement spec X", Reply: fakeapi.Reply{Text: "I need a decision.\n" + authMarker}},
		{When: answerRule, Respond: func(r fakeapi.Request) fakeapi.Reply {
			label := "OAuth2"
			if strings.Contains(r.LastUserText, "JWT") {
				label = "JWT"
			}
			return fakeapi.Reply{Text: "Writing the auth setting.", ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{
				"command": "echo " + label + " > auth.txt && echo wrote-auth-file", "description": "Write auth.txt"}}}
		}},
		{When: "wrote-auth-file", Reply: fakeapi.Reply{Text: "Implemented with JWT."}},
		{When: "Check spec Y", Reply: fakeapi.Reply{Text: "Nothing needed changing."}},
	}
}

// gitCmd runs git for a test, with a fixed identity and no user config.
func gitCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Person", "GIT_AUTHOR_EMAIL=person@example.com",
		"GIT_COMMITTER_NAME=Person", "GIT_COMMITTER_EMAIL=person@example.com", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

type gitE2E struct {
	*e2e
	gh       *githubtest.Server
	origin   string
	checkout string
}

const deliveryRepo = "acme/app"

// newGitE2E makes origin (bare, one commit on main), the person's checkout
// (a clone), a fake GitHub where "maint" may answer, and the config.
func newGitE2E(t *testing.T) *gitE2E {
	t.Helper()
	return newGitE2EWith(t, deliveryRules()...)
}

// newGitE2EWith is newGitE2E with the fake model's rules given.
func newGitE2EWith(t *testing.T, rules ...fakeapi.Rule) *gitE2E {
	t.Helper()
	clitest.Git(t)
	e := newE2E(t, rules...)
	// The origin's path ends in the repository's owner/name, as a URL of
	// it does: a run from one of its issues checks its checkout is of it.
	g := &gitE2E{e2e: e, gh: githubtest.NewServer(t), origin: filepath.Join(e.dir, "origin", deliveryRepo+".git"), checkout: filepath.Join(e.dir, "checkout")}
	seed := filepath.Join(e.dir, "seed")
	gitCmd(t, e.dir, "init", "--quiet", "--bare", "--initial-branch=main", g.origin)
	gitCmd(t, e.dir, "init", "--quiet", "--initial-branch=main", seed)
	os.WriteFile(filepath.Join(seed, "README.md"), []byte("app\n"), 0o600)
	gitCmd(t, seed, "add", ".")
	gitCmd(t, seed, "commit", "--quiet", "-m", "first")
	gitCmd(t, seed, "push", "--quiet", g.origin, "main")
	gitCmd(t, e.dir, "clone", "--quiet", g.origin, g.checkout)
	g.gh.RequireToken("test-token")
	g.gh.SetPermission("maint", "maintain")
	e.writeConfig(fmt.Sprintf("  github:\n    enabled: true\n    base_url: %q\n    token: test-token\n    repo: %s\n    poll_interval: 100ms\n",
		g.gh.URL()+"/", deliveryRepo))
	return g
}

// spec writes a spec file for the checkout and returns its path.
func (g *gitE2E) spec(name, task, extra string) string {
	g.t.Helper()
	p := filepath.Join(g.dir, name+".md")
	body := fmt.Sprintf("---\nname: %s\nworkdir: %q\nallowed_tools: [Bash]\n%sgit:\n  pull_request:\n    reviewers: [octocat]\n    labels: [orchestrator]\n%s---\n%s\n",
		name, g.checkout, "", extra, task)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		g.t.Fatal(err)
	}
	return p
}

// presetSpec is a spec whose question is answered by the spec itself.
func (g *gitE2E) presetSpec(name, task, gitExtra string) string {
	g.t.Helper()
	p := filepath.Join(g.dir, name+".md")
	body := fmt.Sprintf("---\nname: %s\nworkdir: %q\nallowed_tools: [Bash]\nsurfaces: [terminal]\nanswers:\n  Auth: JWT\ngit:\n%s  pull_request:\n    reviewers: [octocat]\n    labels: [orchestrator]\n---\n%s\n",
		name, g.checkout, gitExtra, task)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		g.t.Fatal(err)
	}
	return p
}

// wantCheckoutUntouched: the person's checkout is on main, clean, and has
// no worktree of a run.
func (g *gitE2E) wantCheckoutUntouched(t *testing.T, worktrees int) {
	t.Helper()
	if b := gitCmd(t, g.checkout, "branch", "--show-current"); b != "main" {
		t.Errorf("checkout on branch %s, want main", b)
	}
	if s := gitCmd(t, g.checkout, "status", "--porcelain"); s != "" {
		t.Errorf("checkout not clean:\n%s", s)
	}
	if _, err := os.Stat(filepath.Join(g.checkout, "auth.txt")); err == nil {
		t.Errorf("the run wrote into the person's checkout")
	}
	if list := gitCmd(t, g.checkout, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1+worktrees {
		t.Errorf("worktrees:\n%s\nwant %d besides the checkout", list, worktrees)
	}
}

// wantDelivered: the run's branch is on origin on top of main with the
// model's file, and the fake GitHub has one PR for it.
func (g *gitE2E) wantDelivered(t *testing.T, run store.Run) (store.Delivery, githubtest.PullRequest) {
	t.Helper()
	dl, ok, err := g.store().Delivery(context.Background(), run.ID)
	if err != nil || !ok {
		t.Fatalf("delivery of %s: %v %v", run.ID, ok, err)
	}
	if got := gitCmd(t, g.origin, "show", dl.Branch+":auth.txt"); got != "JWT" {
		t.Errorf("auth.txt on origin's %s = %q, want JWT", dl.Branch, got)
	}
	if parent, main := gitCmd(t, g.origin, "rev-parse", dl.Branch+"^"), gitCmd(t, g.origin, "rev-parse", "main"); parent != main {
		t.Errorf("the branch is not one commit on top of main")
	}
	var mine []githubtest.PullRequest
	for _, p := range g.gh.Pulls(deliveryRepo) {
		if p.Head == dl.Branch {
			mine = append(mine, p)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("pull requests for %s: %+v, want exactly one", dl.Branch, mine)
	}
	pr := mine[0]
	if pr.Base != "main" || strings.Join(pr.Reviewers, ",") != "octocat" || strings.Join(pr.Labels, ",") != "orchestrator" {
		t.Errorf("PR base %s reviewers %v labels %v", pr.Base, pr.Reviewers, pr.Labels)
	}
	for _, want := range []string{"Implemented with JWT.", "Auth: Which auth method?", "OAuth2 / JWT", "| JWT |", delivery.Marker(run.ID)} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("PR body lacks %q:\n%s", want, pr.Body)
		}
	}
	if _, err := os.Stat(dl.Worktree); !os.IsNotExist(err) || dl.RemovedAt.IsZero() {
		t.Errorf("worktree %s left after the run (removed at %v): %v", dl.Worktree, dl.RemovedAt, err)
	}
	return dl, pr
}

// TestRunSpecDeliversAPullRequestAnsweredOnGitHub: `run SPEC` with a git
// section; a maintainer answers on GitHub; the model's file lands on its
// own branch on origin, one PR names the question, the choice and the
// maintainer; the person's checkout is untouched; `show` has it all.
func TestRunSpecDeliversAPullRequestAnsweredOnGitHub(t *testing.T) {
	t.Parallel()
	g := newGitE2E(t)
	spec := g.spec("deps", "Implement spec X", "")
	done := make(chan int, 1)
	go func() {
		code, _, _ := g.run("", "run", "--surface", "github", spec)
		done <- code
	}()
	q := g.gh.WaitQuestion(t, deliveryRepo, 1, 2*time.Minute)
	g.gh.AddComment(deliveryRepo, q.Issue, "maint", "2")
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("run: exit %d", code)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the run did not finish")
	}
	run := g.onlyRun()
	if run.Status != store.RunDone {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}
	dl, pr := g.wantDelivered(t, run)
	if !strings.Contains(pr.Body, "@maint") || !strings.Contains(pr.Body, "github") || !strings.Contains(pr.Body, "/issues/"+fmt.Sprint(q.Issue)) {
		t.Errorf("PR body lacks the answerer, the surface or the issue link:\n%s", pr.Body)
	}
	g.wantCheckoutUntouched(t, 0)
	// The question issue links the PR.
	linked := false
	for _, c := range g.gh.Comments(deliveryRepo, q.Issue) {
		if strings.Contains(c.Body, "/pull/"+fmt.Sprint(pr.Number)) {
			linked = true
		}
	}
	if !linked || !dl.Commented {
		t.Errorf("the question issue has no comment linking the PR")
	}

	code, out, _ := g.run("", "show", run.ID)
	for _, want := range []string{"decision log:", "Which auth method?", "JWT, by @maint on github", "⚙ Bash: echo JWT > auth.txt", dl.Branch, "/pull/"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("show: exit %d, output lacks %q", code, want)
		}
	}
	code, out, _ = g.run("", "show", "--json", run.ID)
	var js struct {
		V         int `json:"v"`
		Decisions []struct {
			Question   string   `json:"question"`
			Options    []string `json:"options"`
			Answer     string   `json:"answer"`
			AnsweredBy string   `json:"answered_by"`
			Surface    string   `json:"surface"`
		} `json:"decisions"`
		Delivery struct {
			Branch         string `json:"branch"`
			Commit         string `json:"commit"`
			PullRequestURL string `json:"pull_request_url"`
		} `json:"delivery"`
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil || code != 0 {
		t.Fatalf("show --json: exit %d, %v", code, err)
	}
	if js.V != 1 || len(js.Decisions) != 1 || js.Decisions[0].Answer != "JWT" || js.Decisions[0].AnsweredBy != "@maint" ||
		js.Decisions[0].Surface != "github" || len(js.Decisions[0].Options) != 2 || js.Delivery.Commit != dl.CommitSHA || js.Delivery.PullRequestURL == "" {
		t.Errorf("show --json = %+v", js)
	}
}

// TestTwoRunsOfOneSpecAtOnce: two runs at once get two worktrees, two
// branches and two PRs.
func TestTwoRunsOfOneSpecAtOnce(t *testing.T) {
	t.Parallel()
	g := newGitE2E(t)
	spec := g.presetSpec("deps", "Implement spec X", "")
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _, _ = g.run("", "run", spec)
		}()
	}
	wg.Wait()
	if codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("exit codes %v", codes)
	}
	runs, err := g.store().ListRuns(context.Background(), store.RunFilter{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs %v %v", runs, err)
	}
	a, _ := g.wantDelivered(t, runs[0])
	b, _ := g.wantDelivered(t, runs[1])
	if a.Branch == b.Branch || a.Worktree == b.Worktree {
		t.Errorf("the two runs shared %s / %s", a.Branch, a.Worktree)
	}
	if n := len(g.gh.Pulls(deliveryRepo)); n != 2 {
		t.Errorf("%d pull requests, want 2", n)
	}
	g.wantCheckoutUntouched(t, 0)
}

// TestRunWithoutChangeOpensNoPR: nothing changed, nothing committed, no PR,
// and the run says so.
func TestRunWithoutChangeOpensNoPR(t *testing.T) {
	t.Parallel()
	g := newGitE2E(t)
	spec := g.presetSpec("check", "Check spec Y", "")
	code, out, _ := g.run("", "run", spec)
	if code != 0 || !strings.Contains(out, "no change: nothing committed, no pull request") {
		t.Fatalf("run: exit %d, output lacks the no-change line", code)
	}
	if n := len(g.gh.Pulls(deliveryRepo)); n != 0 {
		t.Fatalf("%d pull requests, want none", n)
	}
	if out := gitCmd(t, g.origin, "branch", "--list", "orchestrator/*"); out != "" {
		t.Fatalf("branches pushed: %s", out)
	}
	g.wantCheckoutUntouched(t, 0)
	if out := gitCmd(t, g.checkout, "branch", "--list", "orchestrator/*"); out != "" {
		t.Fatalf("an empty branch was left: %s", out)
	}
}

// TestKillAfterCommitThenResumeOpensOnePR: kill -9 after the commit was
// recorded and before the push and the PR; resume opens exactly one PR.
func TestKillAfterCommitThenResumeOpensOnePR(t *testing.T) {
	t.Parallel()
	g := newGitE2E(t)
	spec := g.presetSpec("deps", "Implement spec X", "")
	for _, point := range []string{delivery.FailpointCommitted, delivery.FailpointPushed} {
		wantKilled(t, g.child("", point, "run", spec).Run())
	}
	runs, err := g.store().ListRuns(context.Background(), store.RunFilter{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs %v %v", runs, err)
	}
	for _, run := range runs {
		if err := g.child("", "", "resume", run.ID).Run(); err != nil {
			t.Fatalf("resume %s: %v", run.ID, err)
		}
		// Resuming a done run again changes nothing.
		g.child("", "", "resume", run.ID).Run()
	}
	runs, _ = g.store().ListRuns(context.Background(), store.RunFilter{})
	for _, run := range runs {
		if run.Status != store.RunDone {
			t.Fatalf("run %s: %s %s", run.ID, run.Status, run.Error)
		}
		g.wantDelivered(t, run)
	}
	if n := len(g.gh.Pulls(deliveryRepo)); n != 2 {
		t.Fatalf("%d pull requests for 2 runs, want 2", n)
	}
	g.wantCheckoutUntouched(t, 0)
}

// TestPushRejectedFailsTheRunAndKeepsTheWorktree: someone pushed to the
// run's branch meanwhile; the push is not a fast-forward: a clear error,
// the run failed, its worktree kept and listed by status.
func TestPushRejectedFailsTheRunAndKeepsTheWorktree(t *testing.T) {
	t.Parallel()
	g := newGitE2E(t)
	const branch = "orchestrator/deps/fixed"
	other := filepath.Join(g.dir, "other")
	gitCmd(t, g.dir, "clone", "--quiet", g.origin, other)
	os.WriteFile(filepath.Join(other, "theirs.txt"), []byte("theirs\n"), 0o600)
	gitCmd(t, other, "add", ".")
	gitCmd(t, other, "commit", "--quiet", "-m", "theirs")
	gitCmd(t, other, "push", "--quiet", "origin", "HEAD:refs/heads/"+branch)
	spec := g.presetSpec("deps", "Implement spec X", "  branch: "+branch+"\n")
	code, out, _ := g.run("", "run", spec)
	if code != exitFailed || !strings.Contains(out, "push rejected") || !strings.Contains(out, "not a fast-forward") {
		t.Fatalf("run: exit %d, want %d and the push error", code, exitFailed)
	}
	run := g.onlyRun()
	if run.Status != store.RunFailed || !strings.Contains(run.Error, "push rejected") {
		t.Fatalf("run = %s %q", run.Status, run.Error)
	}
	dl, _, _ := g.store().Delivery(context.Background(), run.ID)
	if b, err := os.ReadFile(filepath.Join(dl.Worktree, "auth.txt")); err != nil || strings.TrimSpace(string(b)) != "JWT" {
		t.Fatalf("worktree not kept with the model's file: %v", err)
	}
	if n := len(g.gh.Pulls(deliveryRepo)); n != 0 {
		t.Fatalf("%d pull requests after a rejected push", n)
	}
	g.wantCheckoutUntouched(t, 1)
	code, out, _ = g.run("", "status")
	if code != 0 || !strings.Contains(out, dl.Worktree) {
		t.Fatalf("status does not list the kept worktree")
	}
	code, out, _ = g.run("", "gc", "--older-than", "0s")
	if code != 0 || !strings.Contains(out, "removed "+dl.Worktree) {
		t.Fatalf("gc: exit %d", code)
	}
	g.wantCheckoutUntouched(t, 0)
}

// TestRunGitFlagDeliversAPrompt: `run --git --prompt` delivers through git
// without a spec; a task that changes nothing says so and leaves no branch.
func TestRunGitFlagDeliversAPrompt(t *testing.T) {
	t.Parallel()
	g := newGitE2E(t)
	code, out, _ := g.run("", "run", "--git", "--surface", "terminal", "--workdir", g.checkout, "--prompt", "Check spec Y")
	if code != 0 || !strings.Contains(out, "no change: nothing committed, no pull request") {
		t.Fatalf("run --git: exit %d, output lacks the no-change line", code)
	}
	dl, ok, err := g.store().Delivery(context.Background(), g.onlyRun().ID)
	if err != nil || !ok || dl.State != store.DeliveryUnchanged || dl.RemovedAt.IsZero() {
		t.Fatalf("delivery = %+v, %v, %v", dl, ok, err)
	}
	g.wantCheckoutUntouched(t, 0)
}
