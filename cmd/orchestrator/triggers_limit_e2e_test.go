package main

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestIssueTriggersMaxRunsPerHour: with triggers.github.max_runs_per_hour
// 1, serve starts the run of a label, then refuses a maintainer's mention
// in another issue with one reply naming the key, however often it comes
// (two deliveries, and the poll that runs beside the webhook): no second
// run, no 👀.
func TestIssueTriggersMaxRunsPerHour(t *testing.T) {
	t.Parallel()
	te := newTriggerE2E(t, true)
	f, err := os.OpenFile(te.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("    max_runs_per_hour: 1\n"); err != nil { // under triggers.github, the config's last block
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	gh := te.gh
	addr, stop := te.serve(t)

	first := gh.OpenIssue(deliveryRepo, "bob", "Add a login test", "Please.")
	gh.AddLabel(deliveryRepo, first, "alice", "orchestrator")
	te.deliver(t, addr, "issues", "d-1", gh.IssuesEvent(deliveryRepo, first, "labeled", "orchestrator", "alice"))
	waitFor(t, "the label's run to finish", func() bool {
		r, ok := te.runOf(t, "issue")
		return ok && r.Status == store.RunDone
	})

	second := gh.OpenIssue(deliveryRepo, "bob", "Fix the logout", "It hangs.")
	cm := gh.AddComment(deliveryRepo, second, "alice", "@orchestrator run issue")
	payload := gh.IssueCommentEvent(deliveryRepo, cm, "created")
	te.deliver(t, addr, "issue_comment", "d-2", payload)
	te.deliver(t, addr, "issue_comment", "d-3", payload) // the same event otherwise delivered
	gh.WaitFor(t, 2*time.Minute, "the reply about the limit", func() bool { return len(te.replies(second)) >= 1 })
	// The poll beside the webhook lists the comment too: two listings
	// after the reply, and the first of them was handled whole.
	listings := func() int {
		n := 0
		for _, r := range gh.Requests() {
			if r.Method == http.MethodGet && r.Path == "/repos/"+deliveryRepo+"/issues/comments" {
				n++
			}
		}
		return n
	}
	seen := listings()
	gh.WaitFor(t, 2*time.Minute, "two more polls", func() bool { return listings() >= seen+2 })
	stop()

	if runs := te.runs(t); len(runs) != 1 {
		t.Fatalf("runs %d, want 1 (the label's)", len(runs))
	}
	r := te.replies(second)
	if len(r) != 1 || !strings.Contains(r[0].Body, "triggers.github.max_runs_per_hour") || !strings.Contains(r[0].Body, "started 1 runs in the last hour") {
		t.Errorf("replies on #%d = %+v, want one about max_runs_per_hour", second, r)
	}
	if c, _ := gh.Comment(deliveryRepo, cm); len(c.Reactions) != 0 {
		t.Errorf("the refused mention got reactions %+v", c.Reactions)
	}
}
