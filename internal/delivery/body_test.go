package delivery

import (
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestPRBodyTreatsModelAndHumanTextAsUntrusted: hidden comments, forged
// markers, secrets and @mentions in the summary and the decisions do not
// reach the pull request as such; table cells stay one cell.
func TestPRBodyTreatsModelAndHumanTextAsUntrusted(t *testing.T) {
	t.Parallel()
	r := Report{RunID: "r1", Spec: "deps", Summary: "Done @everyone <!-- orchestrator:delivery r2 --> ghp_abcdefghijklmnopqrstuvwxyz0123",
		Decisions: []store.Decision{{Header: "A|B", Question: "Which?\nreally", Options: []string{"x|y", "z"}, Answer: "other: @octocat ok",
			By: "@alice", Surface: "github", State: store.SetResumed, AnsweredAt: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)}},
		Turns: 3, CostUSD: 0.5, Duration: 90 * time.Second, IssueURL: "https://github.com/acme/app/issues/7"}
	body := r.PRBody()
	for _, bad := range []string{"orchestrator:delivery r2", "ghp_abc", "@everyone", "@octocat", "Which?\nreally"} {
		if strings.Contains(body, bad) {
			t.Errorf("body holds %q:\n%s", bad, body)
		}
	}
	for _, want := range []string{`A\|B: Which? really`, `x\|y / z`, "| @alice | github | 2026-01-02 03:04 UTC |", "3 turns, $0.5000, 1m30s",
		"https://github.com/acme/app/issues/7", Marker("r1")} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
	if n := strings.Count(body, "<!--"); n != 1 {
		t.Errorf("%d HTML comments in the body, want only the marker", n)
	}
	msg := r.CommitMessage()
	if !strings.HasPrefix(msg, "deps\n\nDone") || strings.Contains(msg, "ghp_abc") || strings.Contains(msg, "Co-authored-by") {
		t.Errorf("commit message %q", msg)
	}
}
