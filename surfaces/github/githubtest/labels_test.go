package githubtest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

// TestLabelsAndIssueListing: a label put on an issue shows in its labels,
// moves its updated_at, and is a "labeled" event of its timeline; the
// issue listing filters by state, labels and since, sorts by updated, and
// refuses bad parameters as GitHub does (422); the issues webhook payload
// has the label.
func TestLabelsAndIssueListing(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.RequireToken("tok")
	ctx := context.Background()
	c := newClient(t, srv)
	now := time.Now().UTC().Truncate(time.Second)
	srv.SetNow(func() time.Time { return now.Add(-time.Hour) })
	old := srv.OpenIssue("acme/app", "bob", "Old", "")
	fresh := srv.OpenIssue("acme/app", "bob", "Fresh", "")
	srv.SetNow(func() time.Time { return now })
	ev := srv.AddLabel("acme/app", fresh, "alice", "orchestrator")
	if ev == 0 || srv.AddLabel("acme/app", fresh, "alice", "Orchestrator") != 0 {
		t.Fatalf("AddLabel = %d, and again must record nothing", ev)
	}

	list := func(opts *gh.IssueListByRepoOptions) []int {
		t.Helper()
		is, _, err := c.Issues.ListByRepo(ctx, "acme", "app", opts)
		if err != nil {
			t.Fatal(err)
		}
		var ns []int
		for _, i := range is {
			ns = append(ns, i.GetNumber())
		}
		return ns
	}
	if got := list(&gh.IssueListByRepoOptions{Labels: []string{"orchestrator"}}); len(got) != 1 || got[0] != fresh {
		t.Errorf("labelled = %v, want [%d]", got, fresh)
	}
	if got := list(&gh.IssueListByRepoOptions{Since: now.Add(-time.Minute)}); len(got) != 1 || got[0] != fresh {
		t.Errorf("since = %v, want [%d] (the label moved its updated_at)", got, fresh)
	}
	if got := list(&gh.IssueListByRepoOptions{Sort: "updated", Direction: "asc"}); len(got) != 2 || got[0] != old {
		t.Errorf("by updated = %v, want %d first", got, old)
	}
	srv.RemoveLabel("acme/app", fresh, "alice", "orchestrator")
	if got := list(&gh.IssueListByRepoOptions{Labels: []string{"orchestrator"}}); len(got) != 0 {
		t.Errorf("after the label went: %v", got)
	}
	for _, bad := range []string{"state=shut", "sort=size", "since=yesterday"} {
		req, _ := c.NewRequest("GET", "repos/acme/app/issues?"+bad, nil)
		if resp, err := c.Do(ctx, req, nil); err == nil || resp.StatusCode != 422 {
			t.Errorf("%s: %v, want 422", bad, err)
		}
	}

	evs, _, err := c.Issues.ListIssueEvents(ctx, "acme", "app", fresh, nil)
	if err != nil || len(evs) != 2 {
		t.Fatalf("events = %d, %v; want labeled and unlabeled", len(evs), err)
	}
	if e := evs[0]; e.GetID() != ev || e.GetEvent() != "labeled" || e.GetLabel().GetName() != "orchestrator" || e.GetActor().GetLogin() != "alice" || e.GetCreatedAt().IsZero() {
		t.Errorf("labeled event %+v", e)
	}
	if evs[1].GetEvent() != "unlabeled" {
		t.Errorf("second event %q, want unlabeled", evs[1].GetEvent())
	}
	if _, _, err := c.Issues.ListIssueEvents(ctx, "acme", "app", 99, nil); err == nil {
		t.Error("events of a missing issue: want 404")
	}

	var p gh.IssuesEvent
	if err := json.Unmarshal(srv.IssuesEvent("acme/app", fresh, "labeled", "orchestrator", "alice"), &p); err != nil {
		t.Fatal(err)
	}
	if p.GetAction() != "labeled" || p.GetLabel().GetName() != "orchestrator" || p.GetIssue().GetNumber() != fresh ||
		p.GetRepo().GetFullName() != "acme/app" || p.GetSender().GetLogin() != "alice" {
		t.Errorf("issues payload %+v", p)
	}
}
