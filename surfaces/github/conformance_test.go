package github

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		issue int  // 0: an issue per run
		bare  bool // answer without "/answer QID"
	}{
		{"FixedIssue", 1, false},
		{"IssuePerRun", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			post := func(t *testing.T, login string, set questions.Set, answers []questions.Answer) {
				c := f.waitAsked(t, set)
				f.srv.AddComment(testRepo, c.Issue, login, answerBody(set, answers, tc.bare))
			}
			surfacetest.Run(t, surfacetest.Backend{
				New: func(t *testing.T) surfaces.Surface {
					// Without a store: every Ask reads its issue
					// (TestConformanceWatch runs the suite with Refs).
					cfg := f.config(tc.issue)
					cfg.Refs = nil
					return f.surface(t, cfg)
				},
				Answer: func(t *testing.T, set questions.Set, answers []questions.Answer) {
					post(t, "alice", set, answers)
				},
				Intrude: func(t *testing.T, set questions.Set, answers []questions.Answer) {
					post(t, "mallory", set, answers)
				},
				Posted: func(t *testing.T, set questions.Set) int { return len(f.questionComments(set)) },
				// Fixed issue: the post fails with a 502; an issue per
				// run: the issue is opened but the response is lost.
				Transient: func(t *testing.T, set questions.Set) {
					if tc.issue != 0 {
						f.srv.Fail(http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/comments", testRepo, tc.issue), http.StatusBadGateway, nil, `{"message":"Server Error"}`)
					} else {
						f.srv.LoseResponse(http.MethodPost, "/repos/"+testRepo+"/issues", http.StatusBadGateway)
					}
				},
				Shown:  func(t *testing.T, set questions.Set) string { return f.shown(set) },
				Person: "alice",
				Features: surfacetest.Features{
					MultiSelect: true, FreeText: true, MultiQuestion: true, AnswerWhileDown: true,
				},
			})
		})
	}
}
