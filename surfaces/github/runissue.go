package github

import (
	"context"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// RunIssue returns the number of the issue a run's questions are asked in
// (the configured issue, or the run's own, found by its marker), or 0 when
// it has none. It never opens one. The delivery of a run's work comments
// there with the link to its pull request.
func (s *Surface) RunIssue(ctx context.Context, runID string) (int, error) {
	return s.issueFor(ctx, questions.Set{RunID: runID}, false)
}

// Repo is the surface's repository, "owner/name".
func (s *Surface) Repo() string { return s.repo() }
