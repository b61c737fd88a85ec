package delivery

import (
	"context"
	"slices"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// FollowUpQuestion is what a follow-up's row of the decision log says in
// its question column: the answer column holds the feedback.
const FollowUpQuestion = "Feedback on the work (the session went on with it)"

// withFollowUps adds the run's follow-ups (feedback given after its model
// was done: store.QueueFollowUp) to its decision log, each where it came
// in time: who gave it, when and what, among the questions asked before
// and after.
func withFollowUps(ctx context.Context, st *store.Store, runID string, decisions []store.Decision) ([]store.Decision, error) {
	fus, err := st.FollowUps(ctx, runID)
	if err != nil || len(fus) == 0 {
		return decisions, err
	}
	for _, f := range fus {
		decisions = append(decisions, store.Decision{Question: FollowUpQuestion, Answer: f.Text, By: f.Who, Surface: f.Surface,
			State: "feedback", AskedAt: f.At, AnsweredAt: f.At})
	}
	slices.SortStableFunc(decisions, func(a, b store.Decision) int { return a.AskedAt.Compare(b.AskedAt) })
	return decisions, nil
}
