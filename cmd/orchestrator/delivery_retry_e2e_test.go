package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// deliveryPulls is where the fake GitHub opens deliveryRepo's pull requests.
const deliveryPulls = "/repos/" + deliveryRepo + "/pulls"

// TestDeliveryThroughTransientGitHubFailures: `run SPEC` whose pull request
// GitHub first answers with a 502 and then a secondary rate limit (403,
// Retry-After: 1), or creates and then drops the connection before
// answering: the run ends done with exactly one pull request.
func TestDeliveryThroughTransientGitHubFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault func(g *gitE2E)
		posts []int // the statuses of POST /pulls, in order (0: no response)
	}{
		{"502 then 403 Retry-After", func(g *gitE2E) {
			g.gh.Fail(http.MethodPost, deliveryPulls, http.StatusBadGateway, nil, "<html>502 Bad Gateway</html>")
			g.gh.SecondaryRateLimit(http.MethodPost, deliveryPulls, http.StatusForbidden, 1)
		}, []int{http.StatusBadGateway, http.StatusForbidden, http.StatusCreated}},
		{"lost response", func(g *gitE2E) { g.gh.DropResponse(http.MethodPost, deliveryPulls) }, []int{http.StatusCreated}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGitE2E(t)
			spec := g.presetSpec("deps", "Implement spec X", "")
			tc.fault(g)
			code, out, _ := g.run("", "run", spec)
			if code != 0 || !strings.Contains(out, "pull request https://github.com/"+deliveryRepo+"/pull/") {
				t.Fatalf("run: exit %d, want done with the pull request", code)
			}
			run := g.onlyRun()
			if run.Status != store.RunDone {
				t.Fatalf("run %s %q", run.Status, run.Error)
			}
			g.wantDelivered(t, run)
			g.wantCheckoutUntouched(t, 0)
			var posts []int
			for _, r := range g.gh.Requests() {
				if r.Method == http.MethodPost && r.Path == deliveryPulls {
					posts = append(posts, r.Status)
				}
			}
			if fmt.Sprint(posts) != fmt.Sprint(tc.posts) {
				t.Errorf("POST %s answered %v, want %v", deliveryPulls, posts, tc.posts)
			}
		})
	}
}

// TestDeliveryPendingThenResumeOpensOnePR: GitHub fails every POST /pulls
// (an outage): the run ends done, its delivery pending, the worktree kept;
// status and show say so (text and JSON). After the outage, `resume RUN`
// opens exactly one pull request and removes the worktree; another resume
// has nothing to do.
func TestDeliveryPendingThenResumeOpensOnePR(t *testing.T) {
	t.Parallel()
	g := newGitE2E(t)
	spec := g.presetSpec("deps", "Implement spec X", "")
	g.gh.FailAlways(http.MethodPost, deliveryPulls, http.StatusBadGateway, nil, "<html>502 Bad Gateway</html>")
	code, out, _ := g.run("", "run", spec)
	if code != 0 || !strings.Contains(out, "delivery pending: the pull request failed") || !strings.Contains(out, "orchestrator resume ") {
		t.Fatalf("run: exit %d, want done with the delivery pending", code)
	}
	run := g.onlyRun()
	if run.Status != store.RunDone {
		t.Fatalf("run %s %q, want done", run.Status, run.Error)
	}
	ctx := context.Background()
	dl, ok, err := g.store().Delivery(ctx, run.ID)
	if err != nil || !ok || !dl.Pending || dl.State != store.DeliveryPushed || dl.Attempts != 1 {
		t.Fatalf("delivery = %+v, %v, %v", dl, ok, err)
	}
	if _, err := os.Stat(dl.Worktree); err != nil {
		t.Fatalf("the worktree of a pending delivery went: %v", err)
	}
	if n := len(g.gh.Pulls(deliveryRepo)); n != 0 {
		t.Fatalf("%d pull requests during the outage", n)
	}

	code, out, _ = g.run("", "status")
	if code != 0 || !strings.Contains(out, "Pending deliveries") || !strings.Contains(out, "run "+run.ID+" (done)") ||
		!strings.Contains(out, "the pull request is not opened yet") {
		t.Errorf("status: exit %d, does not list the pending delivery", code)
	}
	code, out, _ = g.run("", "status", "--json")
	var st struct {
		Deliveries []struct {
			RunID     string `json:"run_id"`
			What      string `json:"what"`
			Attempts  int    `json:"attempts"`
			LastError string `json:"last_error"`
		} `json:"deliveries"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || len(st.Deliveries) != 1 || st.Deliveries[0].RunID != run.ID ||
		st.Deliveries[0].What != "pull_request" || st.Deliveries[0].Attempts != 1 || !strings.Contains(st.Deliveries[0].LastError, "502") {
		t.Errorf("status --json deliveries = %+v (%v)", st.Deliveries, err)
	}
	code, out, _ = g.run("", "show", run.ID)
	if code != 0 || !strings.Contains(out, "pending: the pull request is not opened yet") || !strings.Contains(out, "orchestrator resume "+run.ID) {
		t.Errorf("show: exit %d, does not say the delivery is pending", code)
	}
	code, out, _ = g.run("", "show", "--json", run.ID)
	var sh struct {
		Delivery struct {
			Pending       bool   `json:"pending"`
			Attempts      int    `json:"attempts"`
			NextAttemptAt string `json:"next_attempt_at"`
			LastError     string `json:"last_error"`
		} `json:"delivery"`
	}
	if err := json.Unmarshal([]byte(out), &sh); err != nil || code != 0 || !sh.Delivery.Pending || sh.Delivery.Attempts != 1 ||
		sh.Delivery.NextAttemptAt == "" || sh.Delivery.LastError == "" {
		t.Errorf("show --json delivery = %+v (%v)", sh.Delivery, err)
	}

	g.gh.ClearFaults()
	code, out, _ = g.run("", "resume", run.ID)
	if code != 0 || !strings.Contains(out, "pull request https://github.com/"+deliveryRepo+"/pull/") {
		t.Fatalf("resume after the outage: exit %d", code)
	}
	run = g.onlyRun()
	g.wantDelivered(t, run)
	if dl, _, _ := g.store().Delivery(ctx, run.ID); dl.Pending || dl.State != store.DeliveryOpened {
		t.Errorf("delivery after resume = %+v", dl)
	}
	if code, _, errOut := g.run("", "resume", run.ID); code == 0 || !strings.Contains(errOut, "nothing to resume") {
		t.Errorf("a second resume: exit %d, want nothing to resume", code)
	}
	g.wantCheckoutUntouched(t, 0)
}

// TestServeRetriesAPendingDelivery: a run done with its pull request
// pending (GitHub failing every POST /pulls); serve tries it again, backing
// off (each failed attempt moves the next one later), and once the outage
// is over opens exactly one pull request and removes the worktree.
func TestServeRetriesAPendingDelivery(t *testing.T) {
	t.Parallel()
	g := newGitE2E(t)
	spec := g.presetSpec("deps", "Implement spec X", "")
	g.gh.FailAlways(http.MethodPost, deliveryPulls, http.StatusBadGateway, nil, "<html>502 Bad Gateway</html>")
	const wait = 100 * time.Millisecond
	var runOut lockedBuffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &runOut, Stderr: &runOut, Dir: filepath.Join(g.dir, "work"),
		LookupEnv: func(string) (string, bool) { return "", false }}
	m.deliveryRetry = wait
	if code := m.Exec(context.Background(), []string{"--config", g.config, "run", spec}); code != 0 || !strings.Contains(runOut.String(), "delivery pending") {
		t.Fatalf("run: exit %d, want done with the delivery pending:\n%s", code, runOut.String())
	}
	run := g.onlyRun()
	ctx := context.Background()
	first, _, _ := g.store().Delivery(ctx, run.ID)
	if !first.Pending || first.Attempts != 1 {
		t.Fatalf("delivery = %+v, want pending after one attempt", first)
	}

	var out lockedBuffer
	addr := make(chan string, 1)
	sm := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out, Dir: filepath.Join(g.dir, "work"),
		LookupEnv: func(string) (string, bool) { return "", false }, serveReady: func(a string) { addr <- a }}
	sm.deliveryRetry = wait
	g.writeConfig(fmt.Sprintf("  github:\n    enabled: true\n    base_url: %q\n    token: test-token\n    repo: %s\n    poll_interval: 100ms\n"+
		"serve:\n  listen: 127.0.0.1:0\n", g.gh.URL()+"/", deliveryRepo))
	sctx, cancel := context.WithCancel(ctx)
	code := make(chan int, 1)
	go func() { code <- sm.Exec(sctx, []string{"--config", g.config, "serve"}) }()
	defer func() {
		cancel()
		select {
		case <-code:
		case <-time.After(time.Minute):
			t.Error("serve did not stop")
		}
		if t.Failed() {
			t.Logf("serve output:\n%s", out.String())
		}
	}()
	select {
	case <-addr:
	case <-time.After(time.Minute):
		t.Fatal("serve did not start")
	}
	var again store.Delivery
	waitFor(t, "serve to try the delivery again", func() bool {
		again, _, _ = g.store().Delivery(ctx, run.ID)
		return again.Attempts >= 2
	})
	if !again.Pending || !again.NextAttemptAt.After(first.NextAttemptAt) {
		t.Errorf("after serve's failed attempt: %+v; want still pending, its next attempt later", again)
	}
	if n := len(g.gh.Pulls(deliveryRepo)); n != 0 {
		t.Fatalf("%d pull requests during the outage", n)
	}
	g.gh.ClearFaults()
	waitFor(t, "serve to open the pull request", func() bool {
		dl, _, _ := g.store().Delivery(ctx, run.ID)
		return !dl.Pending && dl.State == store.DeliveryOpened && !dl.RemovedAt.IsZero()
	})
	g.wantDelivered(t, g.onlyRun())
	if !strings.Contains(out.String(), "delivery tried again") {
		t.Errorf("serve's log does not say it tried the delivery again")
	}
}
