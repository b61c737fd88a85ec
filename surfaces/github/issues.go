package github

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/internal/retry"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// issueFor returns the issue set is asked in: the configured one, or the
// run's, recorded in the Ledger when it was opened or (create) opened; a
// run with none recorded (one whose issue predates the records) has it
// found once and recorded (legacyRunIssue). Without a durable Ledger (no
// store) it is found by its marker among the repository's issues.
func (s *Surface) issueFor(ctx context.Context, set questions.Set, create bool) (int, error) {
	if s.cfg.Issue > 0 {
		return s.cfg.Issue, nil
	}
	runID := set.RunID
	if runID == "" {
		runID = set.ID
	}
	key := s.key("run\x00" + runID)
	defer s.c.lock(key)()
	s.c.mu.Lock()
	n, ok := s.c.runIssues[key]
	s.c.mu.Unlock()
	if ok {
		return n, nil
	}
	rkey := runIssueKey(s.repo(), runID)
	if s.c.durable {
		v, err := s.c.ledger.CommentDecision(ctx, rkey)
		if err != nil {
			return 0, fmt.Errorf("github: look up the issue of run %s in %s: %w", runID, s.repo(), err)
		}
		if v != "" {
			if n, err = strconv.Atoi(v); err != nil || n <= 0 {
				return 0, fmt.Errorf("github: the issue of run %s in %s is recorded as %q, not an issue number", runID, s.repo(), v)
			}
		} else if n, err = s.legacyRunIssue(ctx, runID, rkey); err != nil {
			return 0, err
		}
	} else {
		var err error
		if n, err = s.findRunIssue(ctx, runID); err != nil {
			return 0, fmt.Errorf("github: find the issue of run %s in %s: %w", runID, s.repo(), err)
		}
	}
	if n == 0 && create {
		opened, err := s.openRunIssue(ctx, set, runID)
		if err != nil {
			return 0, err
		}
		// Recorded at once: the issue is never looked for again (a
		// label taken off it, or a thousand issues opened after it, do
		// not lose it). The first record wins.
		got, err := s.c.ledger.DecideComment(context.WithoutCancel(ctx), rkey, strconv.Itoa(opened))
		if err != nil {
			return 0, fmt.Errorf("github: record issue #%d of run %s in %s: %w", opened, runID, s.repo(), err)
		}
		if n, err = strconv.Atoi(got); err != nil || n <= 0 {
			n = opened
		}
	}
	if n == 0 {
		return 0, nil
	}
	s.c.mu.Lock()
	evict(s.c.runIssues, key)
	s.c.runIssues[key] = n
	s.c.mu.Unlock()
	return n, nil
}

// legacyRunIssue finds the issue of a run that has none recorded: a run
// whose issue was opened before issues were recorded at creation (or
// a run that has none yet). It looks once, the old way (findRunIssue: the
// run's marker in an issue the orchestrator's own identity opened), and
// records what it found, so that the run's next question goes there
// instead of opening a second issue, and the issue is never looked for
// again.
func (s *Surface) legacyRunIssue(ctx context.Context, runID, rkey string) (int, error) {
	n, err := s.findRunIssue(ctx, runID)
	if err != nil {
		return 0, fmt.Errorf("github: find the issue of run %s in %s (none is recorded): %w", runID, s.repo(), err)
	}
	if n == 0 {
		return 0, nil
	}
	got, err := s.c.ledger.DecideComment(context.WithoutCancel(ctx), rkey, strconv.Itoa(n))
	if err != nil {
		return 0, fmt.Errorf("github: record issue #%d of run %s in %s: %w", n, runID, s.repo(), err)
	}
	if r, err := strconv.Atoi(got); err == nil && r > 0 {
		n = r
	}
	s.c.log.Info("github: found the issue of a run opened before issues were recorded, and recorded it", "run", runID, "repo", s.repo(), "issue", n)
	return n, nil
}

// openRunIssue opens the run's issue. After a 5xx or a network error it
// looks for the issue by its marker before opening it again, and never
// opens it again without having looked: the lost response may have come
// from an issue that was opened.
func (s *Surface) openRunIssue(ctx context.Context, set questions.Set, runID string) (int, error) {
	title := truncate(cleanLine(set.Title), 200)
	if title == "" {
		title = "Questions from run " + truncate(cleanLine(runID), 100)
	}
	body := fmt.Sprintf("The orchestrator asks the questions of run `%s` here. Reply to a question comment to answer it.\n\n%s",
		strings.ReplaceAll(cleanLine(runID), "`", "'"), runMarker(runID))
	req := &gh.IssueRequest{Title: gh.String(title), Body: gh.String(body)}
	if len(s.cfg.Labels) > 0 {
		req.Labels = &s.cfg.Labels
	}
	for attempt := 0; ; attempt++ {
		is, _, err := s.c.api.Issues.Create(ctx, s.owner, s.name, req)
		if err == nil {
			s.c.log.Info("github: issue opened", "run", runID, "repo", s.repo(), "issue", is.GetNumber())
			return is.GetNumber(), nil
		}
		if !transient(err) || attempt >= 4 || ctx.Err() != nil {
			return 0, fmt.Errorf("github: open an issue for run %s in %s: %w", runID, s.repo(), err)
		}
		if err := s.c.sleep(ctx, backoffWait(s.c.backoff, attempt, retry.Jitter)); err != nil {
			return 0, err
		}
		n, ferr := s.findRunIssue(ctx, runID)
		for look := 0; ferr != nil; look++ {
			if !transient(ferr) || look >= 4 {
				return 0, fmt.Errorf("github: open an issue for run %s in %s: look for it after a failed response: %w", runID, s.repo(), ferr)
			}
			if err := s.c.sleep(ctx, backoffWait(s.c.backoff, look, retry.Jitter)); err != nil {
				return 0, err
			}
			n, ferr = s.findRunIssue(ctx, runID)
		}
		if n != 0 {
			return n, nil
		}
	}
}

// runIssueKey names the number of a run's own issue in the Ledger.
func runIssueKey(repo, runID string) string {
	return "github/" + strings.ToLower(repo) + "/run-issue/" + runID
}

// findRunIssue looks for the issue carrying the run's marker among the
// repository's issues (with the configured labels), newest first.
func (s *Surface) findRunIssue(ctx context.Context, runID string) (int, error) {
	marker := runMarker(runID)
	me, err := s.c.self(ctx)
	if err != nil {
		return 0, err
	}
	opts := &gh.IssueListByRepoOptions{
		State: "all", Sort: "created", Direction: "desc",
		Labels:      s.cfg.Labels,
		ListOptions: gh.ListOptions{PerPage: 100},
	}
	for page := 0; page < 10; page++ {
		issues, resp, err := s.c.api.Issues.ListByRepo(ctx, s.owner, s.name, opts)
		if err != nil {
			return 0, err
		}
		for _, is := range issues {
			if me.wrote(is.GetUser()) && strings.Contains(is.GetBody(), marker) {
				return is.GetNumber(), nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return 0, nil
}
