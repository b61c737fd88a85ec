package runner_test

import (
	"context"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// TestRememberOnSurfaceMakesSpecRulesOnly: a surface keeps an answer as a
// spec rule; a repo or all rule, a set of another run, or a bad value is
// refused with a reason to show the person.
func TestRememberOnSurfaceMakesSpecRulesOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateRun(ctx, store.Run{ID: "r1", Spec: "nightly", WorkDir: "/w", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	set := questions.Set{ID: "r1-s1", RunID: "r1", Questions: []questions.Question{{ID: "qa", Text: "Deploy?", Options: []questions.Option{{Label: "Yes"}, {Label: "No"}}}}}
	if _, err := st.AskRun(ctx, set, []string{"github"}); err != nil {
		t.Fatal(err)
	}
	if d, err := st.Offer(ctx, questions.Response{SetID: "r1-s1", By: "@alice", Surface: "github", Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"Yes"}}}}); err != nil || !d.Closed {
		t.Fatalf("offer: %+v %v", d, err)
	}
	req := surfaces.RememberRequest{SetID: "r1-s1", By: "@alice", Surface: "github"}
	for _, tc := range []struct{ runID, remember, want string }{
		{"r1", "repo:7d", "only a spec rule is kept from github"},
		{"r1", "all", "only a spec rule is kept from github"},
		{"r1", "spec:7x", "not a number of days"},
		{"r2", "spec:7d", "is not one of run r2"},
	} {
		r := req
		r.Remember = tc.remember
		if _, err := runner.RememberOnSurface(ctx, st, tc.runID, r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.runID, tc.remember, err, tc.want)
		}
	}
	req.Remember = "spec:7d"
	got, err := runner.RememberOnSurface(ctx, st, "r1", req)
	if err != nil || got.RuleID == "" || !strings.Contains(got.Text, "for spec nightly until ") {
		t.Fatalf("remember: %+v, %v", got, err)
	}
}
