package github

import (
	"context"
	"net/http"
	"testing"
)

// TestTriggersPerRepository: each repository watched has its own mention
// and labels (TriggerConfig.PerRepo), and a run's trigger names the
// repository of the issue that started it. By webhook, then by polling.
func TestTriggersPerRepository(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	const api = "acme/api"
	for _, poll := range []bool{false, true} {
		f := newFixture(t)
		f.srv.CreateIssue(api, "First")
		h := newMemTriggers()
		cfg := f.config(1).ClientConfig
		if !poll {
			cfg.WebhookSecret = secret
		}
		c, err := NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.StartTriggers(context.Background(), TriggerConfig{Repos: []string{testRepo, "ACME/Api"}, Mention: "@orchestrator",
			Labels: []string{"orchestrator"}, Handler: h, Poll: poll,
			PerRepo: map[string]RepoTriggers{"acme/API": {Mention: "@bot", Labels: []string{"agent"}}}}); err != nil {
			t.Fatal(err)
		}
		send := func(event, id string, payload []byte) {
			t.Helper()
			if poll {
				return
			}
			if code := deliver(t, c, secret, event, id, payload); code != http.StatusAccepted && code != http.StatusOK {
				t.Fatalf("delivery %s: status %d", id, code)
			}
		}
		appIssue := f.srv.OpenIssue(testRepo, "bob", "App", "app")
		apiIssue := f.srv.OpenIssue(api, "bob", "API", "api")
		// In acme/app: the default mention and label; acme/api's start nothing.
		a1 := f.srv.AddComment(testRepo, appIssue, "alice", "@orchestrator run app")
		send("issue_comment", "d1", f.srv.IssueCommentEvent(testRepo, a1, "created"))
		a2 := f.srv.AddComment(testRepo, appIssue, "alice", "@bot run app")
		send("issue_comment", "d2", f.srv.IssueCommentEvent(testRepo, a2, "created"))
		f.srv.AddLabel(testRepo, appIssue, "alice", "agent")
		send("issues", "d3", f.srv.IssuesEvent(testRepo, appIssue, "labeled", "agent", "alice"))
		// In acme/api: its own mention and label; the defaults start nothing.
		b1 := f.srv.AddComment(api, apiIssue, "alice", "@bot run api")
		send("issue_comment", "d4", f.srv.IssueCommentEvent(api, b1, "created"))
		b2 := f.srv.AddComment(api, apiIssue, "alice", "@orchestrator run api")
		send("issue_comment", "d5", f.srv.IssueCommentEvent(api, b2, "created"))
		f.srv.AddLabel(api, apiIssue, "alice", "orchestrator")
		send("issues", "d6", f.srv.IssuesEvent(api, apiIssue, "labeled", "orchestrator", "alice"))
		ev := f.srv.AddLabel(api, apiIssue, "alice", "agent")
		send("issues", "d7", f.srv.IssuesEvent(api, apiIssue, "labeled", "agent", "alice"))
		if poll {
			f.srv.WaitFor(t, waitLong, "three runs", func() bool { return len(h.runs()) >= 3 })
			// One more poll of each repository after them: nothing else starts.
			n := len(f.srv.Requests())
			f.srv.WaitFor(t, waitLong, "more polls", func() bool { return len(f.srv.Requests()) > n+8 })
		} else {
			c.wg.Wait() // the deliveries' work (no poller runs)
		}
		c.Close()
		keys := map[string]IssueTrigger{}
		for _, r := range h.runs() {
			keys[r.Key] = r
		}
		want := []string{"github:acme/app:comment:" + itoa64(a1), "github:acme/api:comment:" + itoa64(b1),
			"github:acme/api:label:" + itoa(apiIssue) + ":agent:" + itoa64(ev)}
		if len(keys) != len(want) {
			t.Errorf("poll %v: runs %v, want %v", poll, keys, want)
		}
		for _, k := range want {
			if _, ok := keys[k]; !ok {
				t.Errorf("poll %v: no run of %s: %v", poll, k, keys)
			}
		}
		if r := keys["github:acme/api:comment:"+itoa64(b1)]; r.Repo != "ACME/Api" || r.Issue != apiIssue || r.Spec != "api" {
			t.Errorf("poll %v: acme/api's trigger %+v", poll, r)
		}
	}
}
