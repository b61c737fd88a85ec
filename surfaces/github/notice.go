package github

import (
	"context"
	"fmt"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

var _ surfaces.Noticer = (*Surface)(nil)

// Notice comments text on the run's issue (the configured issue, or the
// run's own, opened when it has none), once per key: the comment carries
// the key's marker, and a retry finds it instead of posting twice.
func (s *Surface) Notice(ctx context.Context, runID, key, text string) error {
	issue, err := s.issueFor(ctx, questions.Set{RunID: runID, Title: "Notices of run " + runID}, true)
	if err != nil {
		return fmt.Errorf("github: notice on the issue of run %s: %w", runID, err)
	}
	marker := noticeMarker("notify/" + key)
	comments, _, err := s.listIssueComments(ctx, issue)
	if err != nil {
		return fmt.Errorf("github: notice on %s#%d: list comments: %w", s.repo(), issue, err)
	}
	me, err := s.c.self(ctx)
	if err != nil {
		return fmt.Errorf("github: notice on %s#%d: %w", s.repo(), issue, err)
	}
	if findMarked(me.ownOnly(comments), marker) != nil {
		return nil
	}
	if _, err := s.createComment(ctx, issue, text+"\n\n"+marker, marker); err != nil {
		return fmt.Errorf("github: notice on %s#%d: %w", s.repo(), issue, err)
	}
	s.c.log.Info("github: notice posted", "run", runID, "repo", s.repo(), "issue", issue, "key", key)
	return nil
}
