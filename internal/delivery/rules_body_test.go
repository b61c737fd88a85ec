package delivery

import (
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestPRBodyNamesTheRuleThatAnswered: a question a remembered decision
// answered shows the rule, who made it, from which run and until when.
func TestPRBodyNamesTheRuleThatAnswered(t *testing.T) {
	t.Parallel()
	rule := store.Rule{ID: "r1a2b3c4", MadeBy: "alice", FromRun: "r0", CreatedAt: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC),
		ExpiresAt: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	r := Report{RunID: "r1", Spec: "nightly", Decisions: []store.Decision{{Question: "Upgrade to pgx v5?", Options: []string{"Yes", "No"}, Answer: "Yes",
		By: rule.Provenance(), Surface: store.RuleSurface, State: store.SetResumed, AnsweredAt: time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)}}}
	want := "| Yes | rule r1a2b3c4, made by alice on 2026-11-26 from run r0, expires 2026-12-03 | rule | 2026-11-27 01:00 UTC |"
	if body := r.PRBody(); !strings.Contains(body, want) {
		t.Errorf("body lacks %q:\n%s", want, body)
	}
}
