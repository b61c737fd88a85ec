package githubtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

func newClient(t *testing.T, srv *githubtest.Server) *gh.Client {
	t.Helper()
	c, err := gh.NewClient(srv.Client()).WithAuthToken("tok").WithEnterpriseURLs(srv.URL()+"/", srv.URL()+"/")
	if err != nil {
		t.Fatal(err)
	}
	// WithEnterpriseURLs appends /api/v3/; the fake serves at the root.
	c.BaseURL.Path = "/"
	return c
}

func TestServer(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.RequireToken("tok")
	srv.SetPermission("alice", "maintain")
	ctx := context.Background()
	c := newClient(t, srv)

	is, _, err := c.Issues.Create(ctx, "acme", "app", &gh.IssueRequest{Title: gh.String("T"), Labels: &[]string{"x"}})
	if err != nil || is.GetNumber() != 1 {
		t.Fatalf("create issue = %v, %v", is, err)
	}
	for i := 0; i < 3; i++ {
		srv.AddComment("acme/app", 1, "alice", "hi")
	}
	cs, resp, err := c.Issues.ListComments(ctx, "acme", "app", 0, &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 2}})
	if err != nil || len(cs) != 2 || resp.NextPage != 2 {
		t.Fatalf("list page 1 = %d comments, next %d, %v", len(cs), resp.NextPage, err)
	}
	if cs[0].GetUser().GetLogin() != "alice" || cs[0].GetIssueURL() == "" || cs[0].GetCreatedAt().IsZero() {
		t.Errorf("comment shape: %+v", cs[0])
	}

	// ETag and 304.
	req, _ := c.NewRequest("GET", "repos/acme/app/issues/comments?since="+time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), nil)
	resp, err = c.Do(ctx, req, &cs)
	if err != nil || resp.Header.Get("ETag") == "" {
		t.Fatalf("list = %v, ETag %q", err, resp.Header.Get("ETag"))
	}
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	resp, _ = c.Do(ctx, req, &cs)
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("conditional list: status %d, want 304", resp.StatusCode)
	}

	perm, _, err := c.Repositories.GetPermissionLevel(ctx, "acme", "app", "alice")
	if err != nil || perm.GetPermission() != "write" {
		t.Errorf("permission = %v, %v; want write (maintain's legacy name)", perm, err)
	}
	if _, _, err := c.Reactions.CreateIssueCommentReaction(ctx, "acme", "app", cs[0].GetID(), "eyes"); err != nil {
		t.Fatal(err)
	}
	if got := srv.Reactions("acme/app", cs[0].GetID()); len(got) != 1 || got[0] != "eyes" {
		t.Errorf("reactions = %v", got)
	}

	bad := gh.NewClient(srv.Client())
	bad.BaseURL = c.BaseURL
	if _, _, err := bad.Issues.Get(ctx, "acme", "app", 1); err == nil {
		t.Errorf("request without a token succeeded")
	}
}

// TestServerFaults: a dropped response still creates what was asked and
// leaves the client with a network error; an outage (FailAlways) answers
// every matching request until ClearFaults.
func TestServerFaults(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.RequireToken("tok")
	ctx := context.Background()
	c := newClient(t, srv)
	newPR := &gh.NewPullRequest{Title: gh.String("T"), Head: gh.String("feature"), Base: gh.String("main")}

	srv.DropResponse(http.MethodPost, "/repos/acme/app/pulls")
	if _, resp, err := c.PullRequests.Create(ctx, "acme", "app", newPR); err == nil || resp != nil {
		t.Fatalf("create with the response dropped = %v, %v; want a network error", resp, err)
	}
	if got := srv.Pulls("acme/app"); len(got) != 1 || got[0].Head != "feature" {
		t.Fatalf("pull requests = %+v, want the one created", got)
	}
	if _, resp, err := c.PullRequests.Create(ctx, "acme", "app", newPR); err == nil || resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a second create = %v; want 422, a pull request already exists", err)
	}

	srv.FailAlways(http.MethodGet, "/repos/acme/app/pulls", http.StatusServiceUnavailable, nil, `{"message":"Service Unavailable"}`)
	for i := 0; i < 2; i++ {
		if _, resp, err := c.PullRequests.List(ctx, "acme", "app", nil); err == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("list during the outage = %v, want 503", err)
		}
	}
	srv.ClearFaults()
	if prs, _, err := c.PullRequests.List(ctx, "acme", "app", nil); err != nil || len(prs) != 1 {
		t.Fatalf("list after the outage = %d, %v", len(prs), err)
	}
}

// The repository's comments listing pages as GitHub does: at most 100 a
// page, a Link header with prev, next, last and first, the oldest first
// with since (updated_at at or after it) and an ETag of its own per page.
func TestServerPaginatesAsGitHub(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.RequireToken("tok")
	ctx := context.Background()
	c := newClient(t, srv)
	srv.CreateIssue("acme/app", "T")
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for i := 0; i < 250; i++ {
		srv.AddComment("acme/app", 1, "alice", "hi")
	}
	list := func(page int, etag string) ([]*gh.IssueComment, *gh.Response) {
		t.Helper()
		u := "repos/acme/app/issues/comments?sort=updated&direction=asc&per_page=500&since=" + since
		if page > 1 {
			u += "&page=" + strconv.Itoa(page)
		}
		req, _ := c.NewRequest("GET", u, nil)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		var cs []*gh.IssueComment
		resp, err := c.Do(ctx, req, &cs)
		if err != nil && (resp == nil || resp.StatusCode != http.StatusNotModified) {
			t.Fatalf("list page %d: %v", page, err)
		}
		return cs, resp
	}
	cs1, r1 := list(1, "")
	if len(cs1) != 100 || r1.NextPage != 2 || r1.LastPage != 3 || r1.PrevPage != 0 {
		t.Fatalf("page 1: %d comments, next %d, last %d, prev %d; want 100 (per_page is at most 100), 2, 3, none", len(cs1), r1.NextPage, r1.LastPage, r1.PrevPage)
	}
	cs2, r2 := list(2, "")
	if len(cs2) != 100 || r2.NextPage != 3 || r2.PrevPage != 1 || r2.FirstPage != 1 {
		t.Fatalf("page 2: %d comments, next %d, prev %d, first %d", len(cs2), r2.NextPage, r2.PrevPage, r2.FirstPage)
	}
	cs3, r3 := list(3, "")
	if len(cs3) != 50 || r3.NextPage != 0 || r3.PrevPage != 2 {
		t.Fatalf("page 3: %d comments, next %d, prev %d", len(cs3), r3.NextPage, r3.PrevPage)
	}
	if !cs1[0].GetUpdatedAt().Before(cs3[len(cs3)-1].GetUpdatedAt().Time) && cs1[0].GetID() > cs3[0].GetID() {
		t.Errorf("the first page does not hold the oldest comments")
	}
	if r1.Header.Get("ETag") == r2.Header.Get("ETag") {
		t.Errorf("pages 1 and 2 have the same ETag")
	}
	// A new comment changes the last page only.
	srv.AddComment("acme/app", 1, "alice", "new")
	if _, r := list(1, r1.Header.Get("ETag")); r.StatusCode != http.StatusNotModified {
		t.Errorf("page 1 after a new comment: status %d, want 304 (the oldest first)", r.StatusCode)
	}
	if cs, r := list(3, r3.Header.Get("ETag")); r.StatusCode != http.StatusOK || len(cs) != 51 {
		t.Errorf("page 3 after a new comment: status %d, %d comments; want 200 and 51", r.StatusCode, len(cs))
	}
	// since keeps comments updated at or after it.
	last := cs3[len(cs3)-1].GetUpdatedAt().UTC()
	req, _ := c.NewRequest("GET", "repos/acme/app/issues/comments?per_page=100&since="+last.Format(time.RFC3339), nil)
	var cs []*gh.IssueComment
	if _, err := c.Do(ctx, req, &cs); err != nil || len(cs) == 0 || cs[0].GetUpdatedAt().Before(last) {
		t.Errorf("since %s: %d comments, %v; want those updated at or after it", last, len(cs), err)
	}
}

// TestTokenGrants: what the fake tells of a token is what GitHub tells: a
// classic token's scopes on every response, a fine-grained token's refusal
// naming the permission, the account's role on the repository.
func TestTokenGrants(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.RequireToken("tok")
	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL()+path, nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp, b.Bytes()
	}
	srv.SetTokenScopes("repo", "read:org")
	if resp, _ := get("/user"); resp.Header.Get("X-OAuth-Scopes") != "repo, read:org" {
		t.Errorf("X-OAuth-Scopes = %q", resp.Header.Get("X-OAuth-Scopes"))
	}
	srv.SetTokenPermissions(map[string]string{"issues": "read"})
	if resp, _ := get("/user"); resp.Header.Get("X-OAuth-Scopes") != "" || resp.StatusCode != http.StatusOK {
		t.Errorf("a fine-grained token: %d, scopes %q", resp.StatusCode, resp.Header.Get("X-OAuth-Scopes"))
	}
	if resp, _ := get("/repos/acme/app/issues"); resp.StatusCode != http.StatusOK {
		t.Errorf("issues: %d", resp.StatusCode)
	}
	if resp, _ := get("/repos/acme/app/pulls"); resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Accepted-GitHub-Permissions") != "pull_requests=read" {
		t.Errorf("pulls: %d, accepted %q", resp.StatusCode, resp.Header.Get("X-Accepted-GitHub-Permissions"))
	}
	if resp, _ := get("/repos/acme/app/hooks"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("hooks without repository_hooks: %d", resp.StatusCode)
	}
	srv.SetPermission("orchestrator-bot", "write")
	_, body := get("/repos/acme/app")
	var repo struct {
		Permissions map[string]bool `json:"permissions"`
	}
	if err := json.Unmarshal(body, &repo); err != nil {
		t.Fatal(err)
	}
	if !repo.Permissions["push"] || repo.Permissions["admin"] || !repo.Permissions["pull"] {
		t.Errorf("permissions = %v, want push and pull, not admin", repo.Permissions)
	}
}

// TestReactionsOnBothCommentKinds: an issue comment and a review comment
// take a reaction GitHub knows once per person, refuse an unknown one
// with 422, and show the counts in their reactions rollup.
func TestReactionsOnBothCommentKinds(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.RequireToken("tok")
	ctx := context.Background()
	c := newClient(t, srv)
	srv.CreateIssue("acme/app", "T")
	ic := srv.AddComment("acme/app", 1, "alice", "hi")
	pr := srv.OpenPullRequest("acme/app", "bot", "feature", "work")
	rc := srv.AddReviewComment("acme/app", pr, "alice", "main.go", "nit")
	for i := 0; i < 2; i++ {
		if _, _, err := c.Reactions.CreateIssueCommentReaction(ctx, "acme", "app", ic, "eyes"); err != nil {
			t.Fatalf("issue comment reaction: %v", err)
		}
		if _, _, err := c.Reactions.CreatePullRequestCommentReaction(ctx, "acme", "app", rc, "eyes"); err != nil {
			t.Fatalf("review comment reaction: %v", err)
		}
	}
	if _, resp, err := c.Reactions.CreateIssueCommentReaction(ctx, "acme", "app", ic, "thumbsup"); err == nil || resp.StatusCode != 422 {
		t.Errorf("unknown issue comment reaction: %v, want 422", err)
	}
	if _, resp, err := c.Reactions.CreatePullRequestCommentReaction(ctx, "acme", "app", rc, "thumbsup"); err == nil || resp.StatusCode != 422 {
		t.Errorf("unknown review comment reaction: %v, want 422", err)
	}
	if got := srv.Reactions("acme/app", ic); len(got) != 1 || got[0] != "eyes" {
		t.Errorf("issue comment reactions %v, want one eyes", got)
	}
	if got := srv.ReviewCommentReactions("acme/app", rc); len(got) != 1 || got[0] != "eyes" {
		t.Errorf("review comment reactions %v, want one eyes", got)
	}
	got, _, err := c.Issues.GetComment(ctx, "acme", "app", ic)
	if err != nil || got.GetReactions().GetEyes() != 1 || got.GetReactions().GetTotalCount() != 1 {
		t.Errorf("issue comment rollup = %+v, %v", got.GetReactions(), err)
	}
	rgot, _, err := c.PullRequests.GetComment(ctx, "acme", "app", rc)
	if err != nil || rgot.GetReactions().GetEyes() != 1 || rgot.GetReactions().GetTotalCount() != 1 {
		t.Errorf("review comment rollup = %+v, %v", rgot.GetReactions(), err)
	}
}
