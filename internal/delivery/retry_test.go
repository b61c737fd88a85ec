package delivery

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/github"
)

// pullsPath is where the fake GitHub opens the pull requests of acme/app.
const pullsPath = "/repos/acme/app/pulls"

// retryingFixture is a fixture whose pull requests go through the GitHub
// surface's transport (rate limits, Retry-After, 5xx backoff), as serve
// wires them, with short waits.
func retryingFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, "")
	base := f.gh.Client().Transport
	hc := &http.Client{Transport: github.Transport(github.TransportConfig{Base: base, Backoff: 10 * time.Millisecond, WriteInterval: -1})}
	prs, err := NewGitHub(GitHubConfig{BaseURL: f.gh.URL() + "/", HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Store: f.st, PRs: prs, Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f.d = d
	return f
}

// posts counts the requests that tried to open a pull request.
func (f *fixture) posts() int {
	n := 0
	for _, r := range f.gh.Requests() {
		if r.Method == http.MethodPost && r.Path == pullsPath {
			n++
		}
	}
	return n
}

// TestDeliverOpensOnePRThroughTransientFailures: POST /pulls answered by a
// 502, then a secondary rate limit (403 with Retry-After: 1), then served;
// or served with its connection dropped before the response: the run's
// work ends in exactly one pull request, the delivery not pending.
func TestDeliverOpensOnePRThroughTransientFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		fault     func(f *fixture)
		wantPosts int
	}{
		{"502 then 403 Retry-After", func(f *fixture) {
			f.gh.Fail(http.MethodPost, pullsPath, http.StatusBadGateway, nil, `<html>502 Bad Gateway</html>`)
			f.gh.SecondaryRateLimit(http.MethodPost, pullsPath, http.StatusForbidden, 1)
		}, 3},
		{"lost response", func(f *fixture) { f.gh.DropResponse(http.MethodPost, pullsPath) }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, checkout := repos(t)
			f := retryingFixture(t)
			ctx := context.Background()
			run := f.newRun(t, "r0000rt1", checkout)
			wd, err := f.d.Workdir(ctx, run, prOpts)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(wd, "go.mod"), []byte("module x\n"), 0o600)
			tc.fault(f)
			res, err := f.d.Deliver(ctx, run, prOpts, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Pending || res.Delivery.Pending || res.Delivery.State != store.DeliveryOpened || res.Delivery.PRNumber == 0 {
				t.Fatalf("delivery = %+v", res.Delivery)
			}
			pulls := f.gh.Pulls("acme/app")
			if len(pulls) != 1 || pulls[0].Number != res.Delivery.PRNumber || !strings.Contains(pulls[0].Body, "Updated to v3.") ||
				strings.Join(pulls[0].Reviewers, ",") != "octocat" {
				t.Fatalf("pull requests = %+v, want one, with the body and reviewer", pulls)
			}
			if n := f.posts(); n != tc.wantPosts {
				t.Errorf("%d POST %s, want %d", n, pullsPath, tc.wantPosts)
			}
		})
	}
}

// TestDeliverLeavesAFailingPRPendingThenOpensOne: POST /pulls failing for
// good (every attempt a 502): Deliver leaves the delivery pending (no
// error: the run is done) with the reason and a next attempt, and Finish
// keeps the worktree; once the fault clears, Deliver again opens exactly
// one pull request and the worktree goes.
func TestDeliverLeavesAFailingPRPendingThenOpensOne(t *testing.T) {
	t.Parallel()
	_, checkout := repos(t)
	f := retryingFixture(t)
	ctx := context.Background()
	run := f.newRun(t, "r0000rt2", checkout)
	wd, err := f.d.Workdir(ctx, run, prOpts)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wd, "go.mod"), []byte("module x\n"), 0o600)
	f.gh.FailAlways(http.MethodPost, pullsPath, http.StatusBadGateway, nil, `<html>502 Bad Gateway</html>`)
	before := time.Now()
	res, err := f.d.Deliver(ctx, run, prOpts, nil)
	if err != nil {
		t.Fatalf("deliver: %v, want the delivery left pending", err)
	}
	dl := res.Delivery
	if !res.Pending || !dl.Pending || dl.State != store.DeliveryPushed || dl.Attempts != 1 || !strings.Contains(dl.LastError, "502") ||
		!dl.NextAttemptAt.After(before) {
		t.Fatalf("delivery = %+v, want pending after the push", dl)
	}
	if line := res.Line(); !strings.Contains(line, "delivery pending: the pull request failed") || !strings.Contains(line, "orchestrator resume r0000rt2") {
		t.Errorf("line %q", line)
	}
	if n := f.posts(); n != 3 {
		t.Errorf("%d POST %s, want 3 (Config.Attempts)", n, pullsPath)
	}
	if due, err := f.st.PendingDeliveries(ctx, dl.NextAttemptAt); err != nil || len(due) != 1 || due[0].RunID != run.ID {
		t.Errorf("pending deliveries due = %+v, %v", due, err)
	}
	if due, err := f.st.PendingDeliveries(ctx, before); err != nil || len(due) != 0 {
		t.Errorf("pending deliveries due before the next attempt = %+v, %v", due, err)
	}
	run.Status = store.RunDone
	if err := f.d.Finish(ctx, run); err != nil || !exists(dl.Worktree) {
		t.Fatalf("Finish: %v; the worktree of a pending delivery must stay", err)
	}

	f.gh.ClearFaults()
	res, err = f.d.Deliver(ctx, run, prOpts, nil)
	if err != nil {
		t.Fatal(err)
	}
	dl = res.Delivery
	if res.Pending || dl.Pending || dl.State != store.DeliveryOpened || dl.LastError != "" {
		t.Fatalf("delivery = %+v, want opened", dl)
	}
	if pulls := f.gh.Pulls("acme/app"); len(pulls) != 1 {
		t.Fatalf("%d pull requests, want 1", len(pulls))
	}
	if err := f.d.Finish(ctx, run); err != nil || exists(dl.Worktree) {
		t.Fatalf("Finish: %v; the worktree should go once delivered", err)
	}
}

// TestDeliverRefusedPRFailsAtOnce: a refusal (422) is not tried again and
// leaves nothing pending: the error is the caller's.
func TestDeliverRefusedPRFailsAtOnce(t *testing.T) {
	t.Parallel()
	_, checkout := repos(t)
	f := retryingFixture(t)
	ctx := context.Background()
	run := f.newRun(t, "r0000rt3", checkout)
	wd, err := f.d.Workdir(ctx, run, prOpts)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wd, "go.mod"), []byte("module x\n"), 0o600)
	f.gh.Fail(http.MethodPost, pullsPath, http.StatusUnprocessableEntity, nil, `{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"invalid","field":"base"}]}`)
	res, err := f.d.Deliver(ctx, run, prOpts, nil)
	if err == nil || res.Pending || Transient(err) {
		t.Fatalf("deliver = %+v, %v; want the refusal", res, err)
	}
	if n := f.posts(); n != 1 {
		t.Errorf("%d POST %s, want 1", n, pullsPath)
	}
}

// TestDeliverLeavesAFailingPushPending: the remote unreachable at the
// final push: the delivery is pending at the commit, the run tied to this
// host (the commit is here only); once the remote is back, the push and
// the pull request happen and the run is untied.
func TestDeliverLeavesAFailingPushPending(t *testing.T) {
	t.Parallel()
	origin, checkout := repos(t)
	f := retryingFixture(t)
	ctx := context.Background()
	run := f.newRun(t, "r0000rt4", checkout)
	wd, err := f.d.Workdir(ctx, run, prOpts)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wd, "go.mod"), []byte("module x\n"), 0o600)
	away := origin + ".away"
	if err := os.Rename(origin, away); err != nil {
		t.Fatal(err)
	}
	res, err := f.d.Deliver(ctx, run, prOpts, nil)
	if err != nil {
		t.Fatalf("deliver: %v, want the delivery left pending", err)
	}
	if dl := res.Delivery; !res.Pending || dl.State != store.DeliveryCommitted || dl.Pushed ||
		!strings.Contains(dl.LastError, "push failed") {
		t.Fatalf("delivery = %+v, want pending at the commit", dl)
	}
	if r, _ := f.st.Run(ctx, run.ID); r.Host != store.Hostname() {
		t.Fatalf("run host %q, want tied to %q while the commit is here only", r.Host, store.Hostname())
	}
	if err := os.Rename(away, origin); err != nil {
		t.Fatal(err)
	}
	res, err = f.d.Deliver(ctx, run, prOpts, nil)
	if err != nil || res.Pending || res.Delivery.State != store.DeliveryOpened {
		t.Fatalf("deliver again = %+v, %v", res.Delivery, err)
	}
	if got := git(t, origin, "rev-parse", "refs/heads/"+res.Delivery.Branch); got != res.Delivery.CommitSHA {
		t.Fatalf("origin's branch at %s, want %s", got, res.Delivery.CommitSHA)
	}
	if r, _ := f.st.Run(ctx, run.ID); r.Host != "" {
		t.Fatalf("run host %q, want untied once pushed", r.Host)
	}
	if pulls := f.gh.Pulls("acme/app"); len(pulls) != 1 {
		t.Fatalf("%d pull requests, want 1", len(pulls))
	}
}

// TestTransient: what may pass by trying again, and what will not.
func TestTransient(t *testing.T) {
	t.Parallel()
	resp := func(code int) *http.Response {
		return &http.Response{StatusCode: code, Request: &http.Request{Method: "POST"}}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"502", &gh.ErrorResponse{Response: resp(502), Message: "Server Error"}, true},
		{"503 wrapped", fmt.Errorf("github: open: %w", &gh.ErrorResponse{Response: resp(503)}), true},
		{"429", &gh.ErrorResponse{Response: resp(429)}, true},
		{"403 secondary limit", &gh.ErrorResponse{Response: resp(403), Message: "You have exceeded a secondary rate limit."}, true},
		{"abuse limit", &gh.AbuseRateLimitError{Response: resp(403)}, true},
		{"network", &url.Error{Op: "Post", URL: "https://api.github.com/repos/a/b/pulls", Err: io.EOF}, true},
		{"push failed", fmt.Errorf("%w: unreachable", ErrPushFailed), true},
		{"403 permission", &gh.ErrorResponse{Response: resp(403), Message: "Resource not accessible by integration"}, false},
		{"401", &gh.ErrorResponse{Response: resp(401), Message: "Bad credentials"}, false},
		{"404", &gh.ErrorResponse{Response: resp(404)}, false},
		{"422", &gh.ErrorResponse{Response: resp(422), Message: "Validation Failed"}, false},
		{"push rejected", fmt.Errorf("%w: not a fast-forward", ErrPushRejected), false},
		{"cancelled", context.Canceled, false},
		{"nil", nil, false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("%s: Transient = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestHTTPAuthStatusIsAWord: 401 and 403 count as git's HTTP refusals only
// as words of their own, not inside a path's digits.
func TestHTTPAuthStatusIsAWord(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"fatal: unable to access 'https://x/': the requested url returned error: 403": true,
		"error: 401 unauthorized": true,
		"fatal: '/tmp/testdeliver4037471851/origin' does not appear to be a git repository": false,
		"fatal: could not read from remote repository.":                                     false,
	} {
		if got := httpAuthStatus.MatchString(s); got != want {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	}
}
