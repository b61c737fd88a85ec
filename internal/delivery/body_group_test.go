package delivery

import (
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestPRBodyNamesTheSharedDecision: an answer given for several runs at
// once (answer --all) says so in the decision log, with the other runs.
func TestPRBodyNamesTheSharedDecision(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 3, 4, 0, 0, time.UTC)
	r := Report{RunID: "r1", Spec: "nightly-a", Summary: "Done.", Decisions: []store.Decision{{Question: "Upgrade to pgx v5?",
		Options: []string{"Yes", "No"}, Answer: "Yes", By: "alice", Surface: "cli", State: store.SetResumed, AnsweredAt: at,
		Shared: []store.SharedDecision{{ID: "g0123456789a", By: "alice", Surface: "cli", At: at,
			Others: []store.GroupRun{{RunID: "r2", Spec: "nightly-b"}, {RunID: "r3"}}}}}}}
	body := r.PRBody()
	want := "| Yes (shared decision g0123456789a, also answered in run r2 of spec nightly-b, run r3) | alice | cli |"
	if !strings.Contains(body, want) {
		t.Errorf("body lacks %q:\n%s", want, body)
	}
}
