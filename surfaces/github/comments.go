package github

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/internal/retry"
)

// createComment posts body, which carries marker, on issue. After a 5xx or
// a network error it waits, then looks for marker on the issue before
// posting again: the lost response may have come from a comment that was
// created.
func (s *Surface) createComment(ctx context.Context, issue int, body, marker string) (*gh.IssueComment, error) {
	return s.c.createComment(ctx, s.owner, s.name, issue, body, marker)
}

func (c *Client) createComment(ctx context.Context, owner, name string, issue int, body, marker string) (*gh.IssueComment, error) {
	for attempt := 0; ; attempt++ {
		cm, _, err := c.api.Issues.CreateComment(ctx, owner, name, issue, &gh.IssueComment{Body: gh.String(body)})
		if err == nil {
			return cm, nil
		}
		if !transient(err) || attempt >= 4 || ctx.Err() != nil {
			return nil, err
		}
		c.log.Info("github: posting a comment failed; looking for it before posting again", "repo", owner+"/"+name, "issue", issue, "err", err)
		if err := c.sleep(ctx, backoffWait(c.backoff, attempt, retry.Jitter)); err != nil {
			return nil, err
		}
		comments, _, lerr := c.listIssueComments(ctx, owner, name, issue)
		if lerr != nil {
			continue
		}
		me, lerr := c.self(ctx)
		if lerr != nil {
			continue
		}
		if cm := findMarked(me.ownOnly(comments), marker); cm != nil {
			return cm, nil
		}
	}
}

// findMarked returns the first of comments that carries marker, or nil.
// Give it the orchestrator's own comments (identity.ownOnly).
func findMarked(comments []*gh.IssueComment, marker string) *gh.IssueComment {
	for _, c := range comments {
		if strings.Contains(c.GetBody(), marker) {
			return c
		}
	}
	return nil
}

// transient reports whether err may go away by trying again: a 5xx, or no
// response at all.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) {
		return er.Response != nil && er.Response.StatusCode >= 500
	}
	var rl *gh.RateLimitError
	var ab *gh.AbuseRateLimitError
	return !errors.As(err, &rl) && !errors.As(err, &ab)
}

// listIssueComments lists all comments of an issue and returns the server's
// time of the first response.
func (s *Surface) listIssueComments(ctx context.Context, issue int) ([]*gh.IssueComment, time.Time, error) {
	return s.c.listIssueComments(ctx, s.owner, s.name, issue)
}

func (c *Client) listIssueComments(ctx context.Context, owner, name string, issue int) ([]*gh.IssueComment, time.Time, error) {
	var all []*gh.IssueComment
	var date time.Time
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	for page := 0; page < 100; page++ {
		cs, resp, err := c.api.Issues.ListComments(ctx, owner, name, issue, opts)
		if err != nil {
			return nil, time.Time{}, err
		}
		if date.IsZero() {
			date = serverTime(resp, c.now())
		}
		all = append(all, cs...)
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return all, date, nil
}

// serverTime is the Date of resp, or now if it has none or it is ahead.
func serverTime(resp *gh.Response, now time.Time) time.Time {
	if resp != nil && resp.Response != nil {
		if t, err := http.ParseTime(resp.Header.Get("Date")); err == nil && t.Before(now) {
			return t
		}
	}
	return now
}
