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
)

// apiRepo is the second repository of TestIssueTriggersPerRepository.
const apiRepo = "acme/api"

func TestIssueTriggersPerRepositoryByWebhook(t *testing.T) { testIssueTriggersPerRepository(t, true) }
func TestIssueTriggersPerRepositoryByPolling(t *testing.T) { testIssueTriggersPerRepository(t, false) }

// testIssueTriggersPerRepository: triggers.github.repos gives acme/app and
// acme/api each its own spec, whose workdir is a checkout of it; the
// configuration's surfaces.github.repo is acme/app. A label on an issue of
// each starts a run of that repository's spec whose question is asked and
// answered in that issue, and whose pull request opens on that repository,
// from its own checkout, and closes that issue. A run asked for in acme/api
// of a spec whose checkout is acme/app's is refused with one reply that
// says so (delivered twice), before any run or model call. With the real
// CLI, by webhook and by polling. (A run whose checkout changed after it
// was made fails before its first turn: delivery's
// TestWorkdirRefusesACheckoutOfAnotherRepository.)
func testIssueTriggersPerRepository(t *testing.T, webhook bool) {
	t.Parallel()
	te := newTriggerE2E(t, webhook)
	gh := te.gh
	// acme/api: its own origin (the path ends in its owner/name, as its
	// URL would) and checkout.
	apiOrigin := filepath.Join(te.dir, "origin", apiRepo+".git")
	apiCheckout := filepath.Join(te.dir, "checkout-api")
	seed := filepath.Join(te.dir, "seed-api")
	gitCmd(t, te.dir, "init", "--quiet", "--bare", "--initial-branch=main", apiOrigin)
	gitCmd(t, te.dir, "init", "--quiet", "--initial-branch=main", seed)
	os.WriteFile(filepath.Join(seed, "README.md"), []byte("api\n"), 0o600)
	gitCmd(t, seed, "add", ".")
	gitCmd(t, seed, "commit", "--quiet", "-m", "first")
	gitCmd(t, seed, "push", "--quiet", apiOrigin, "main")
	gitCmd(t, te.dir, "clone", "--quiet", apiOrigin, apiCheckout)
	gh.CreateIssue(apiRepo, "Earlier issue") // #1: the work is asked for in #2

	api := fmt.Sprintf("---\nname: api\nworkdir: %q\nallowed_tools: [Bash]\nsurfaces: [github]\ngit:\n  pull_request:\n    labels: [orchestrator]\n---\nImplement spec X\n", apiCheckout)
	wrong := fmt.Sprintf("---\nname: wrong\nworkdir: %q\nallowed_tools: [Bash]\nsurfaces: [github]\ngit:\n  pull_request: {}\n---\nWrong checkout Z\n", te.checkout)
	for name, body := range map[string]string{"api.md": api, "wrong.md": wrong} {
		if err := os.WriteFile(filepath.Join(te.specDir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := os.ReadFile(te.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, "    repos:\n      - repo: "+deliveryRepo+"\n        spec: login\n      - {repo: "+apiRepo+", spec: api}\n"...)
	if err := os.WriteFile(te.config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}

	addr, _ := te.serve(t)
	appIssue := gh.OpenIssue(deliveryRepo, "bob", "Login is broken", "Users cannot log in.")
	apiIssue := gh.OpenIssue(apiRepo, "bob", "Tokens expire", "The API logs people out.")
	defer func() {
		if t.Failed() {
			for _, r := range []struct {
				repo  string
				issue int
			}{{deliveryRepo, appIssue}, {apiRepo, apiIssue}} {
				for _, c := range gh.Comments(r.repo, r.issue) {
					t.Logf("%s#%d comment %d by %s:\n%s", r.repo, r.issue, c.ID, c.Login, c.Body)
				}
			}
		}
	}()
	gh.AddLabel(deliveryRepo, appIssue, "alice", "orchestrator")
	te.deliver(t, addr, "issues", "d-app", gh.IssuesEvent(deliveryRepo, appIssue, "labeled", "orchestrator", "alice"))
	gh.AddLabel(apiRepo, apiIssue, "alice", "orchestrator")
	te.deliver(t, addr, "issues", "d-api", gh.IssuesEvent(apiRepo, apiIssue, "labeled", "orchestrator", "alice"))

	// Each run asks in its own issue; each is answered there.
	for _, r := range []struct {
		repo  string
		issue int
	}{{deliveryRepo, appIssue}, {apiRepo, apiIssue}} {
		q := gh.WaitQuestion(t, r.repo, 1, 2*time.Minute)
		if q.Issue != r.issue || !strings.Contains(q.Body, "Which auth method?") {
			t.Fatalf("question on %s#%d, want #%d:\n%s", r.repo, q.Issue, r.issue, q.Body)
		}
		gh.AddComment(r.repo, r.issue, "alice", "2")
	}
	delivered := func(spec string) (store.Run, store.Delivery, bool) {
		r, ok := te.runOf(t, spec)
		if !ok || r.Status != store.RunDone {
			return r, store.Delivery{}, false
		}
		dl, ok, _ := te.store().Delivery(context.Background(), r.ID)
		return r, dl, ok && dl.State == store.DeliveryOpened
	}
	waitFor(t, "both runs to be delivered", func() bool {
		_, _, a := delivered("login")
		_, _, b := delivered("api")
		return a && b
	})
	for _, c := range []struct {
		spec, repo, origin string
		issue              int
	}{{"login", deliveryRepo, te.origin, appIssue}, {"api", apiRepo, apiOrigin, apiIssue}} {
		run, dl, _ := delivered(c.spec)
		if got := gitCmd(t, c.origin, "show", dl.Branch+":auth.txt"); got != "JWT" {
			t.Errorf("%s: auth.txt on %s's %s = %q, want JWT", c.spec, c.repo, dl.Branch, got)
		}
		var mine int
		for _, p := range gh.Pulls(c.repo) {
			if p.Head != dl.Branch {
				continue
			}
			mine++
			if !strings.Contains(p.Body, fmt.Sprintf("\nCloses #%d\n", c.issue)) {
				t.Errorf("%s: the pull request on %s does not close #%d:\n%s", c.spec, c.repo, c.issue, p.Body)
			}
		}
		if mine != 1 {
			t.Errorf("%s: %d pull requests of branch %s on %s, want 1", c.spec, mine, dl.Branch, c.repo)
		}
		if !strings.HasPrefix(run.Title, c.repo+"#") {
			t.Errorf("%s: title %q", c.spec, run.Title)
		}
	}
	if n := len(gh.Pulls(deliveryRepo)) + len(gh.Pulls(apiRepo)); n != 2 {
		t.Errorf("%d pull requests in all, want 2", n)
	}

	// A spec whose workdir is acme/app's checkout, asked for in acme/api:
	// refused with a reply that says why, before any run or model call.
	cm := gh.AddComment(apiRepo, apiIssue, "alice", "@orchestrator run wrong")
	te.deliver(t, addr, "issue_comment", "d-wrong", gh.IssueCommentEvent(apiRepo, cm, "created"))
	te.deliver(t, addr, "issue_comment", "d-wrong-again", gh.IssueCommentEvent(apiRepo, cm, "created"))
	var refusals []string
	gh.WaitFor(t, 2*time.Minute, "the reply refusing the wrong checkout", func() bool {
		refusals = refusals[:0]
		for _, c := range gh.Comments(apiRepo, apiIssue) {
			if strings.Contains(c.Body, "<!-- orchestrator:trigger ") && strings.Contains(c.Body, "spec `wrong`") {
				refusals = append(refusals, c.Body)
			}
		}
		return len(refusals) > 0
	})
	// Everything is in: a last event proves the ones before it were read.
	last := gh.AddComment(apiRepo, apiIssue, "alice", "@orchestrator run nosuchspec")
	te.deliver(t, addr, "issue_comment", "d-last", gh.IssueCommentEvent(apiRepo, last, "created"))
	gh.WaitFor(t, 2*time.Minute, "the reply about the unknown spec", func() bool {
		for _, c := range gh.Comments(apiRepo, apiIssue) {
			if strings.Contains(c.Body, "no spec named `nosuchspec`") {
				return true
			}
		}
		return false
	})
	if len(refusals) != 1 {
		t.Errorf("%d replies refusing the wrong checkout, want 1", len(refusals))
	}
	for _, w := range []string{"is a checkout of " + deliveryRepo + ", not of " + apiRepo, "no run was started", "triggers.github.repos"} {
		if !strings.Contains(refusals[0], w) {
			t.Errorf("the reply lacks %q:\n%s", w, refusals[0])
		}
	}
	if strings.Contains(refusals[0], te.dir) {
		t.Errorf("the reply names a folder of this machine:\n%s", refusals[0])
	}
	if _, ok := te.runOf(t, "wrong"); ok {
		t.Errorf("a run of the wrong checkout was made")
	}
	for _, r := range te.fake.Requests() {
		if strings.Contains(r.LastUserText, "Wrong checkout Z") {
			t.Errorf("the model was called for the refused run")
		}
	}
	if n := len(gh.Pulls(deliveryRepo)) + len(gh.Pulls(apiRepo)); n != 2 {
		t.Errorf("%d pull requests after the refusal, want 2", n)
	}
}
