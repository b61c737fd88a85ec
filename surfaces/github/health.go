package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v60/github"
)

// DefaultRequestTimeout bounds one request to GitHub: one attempt (a
// retry has a timeout of its own), from sending it to reading its body.
const DefaultRequestTimeout = 30 * time.Second

// refusalLogEvery is how often a lasting refusal of a repository's polls
// is logged again as an error.
const refusalLogEvery = time.Hour

// health is what the client knows of GitHub's service to it: whether its
// last request got an answer, and the repositories whose polls GitHub
// refuses. Guarded by its mutex.
type health struct {
	mu sync.Mutex
	// noAnswer is why the last request got no response (a timeout, a
	// network error); nil once one did, whatever its status.
	noAnswer error
	refused  map[string]*refusal // by lower-case "owner/name"
}

type refusal struct {
	err    error
	since  time.Time
	logged time.Time
}

// noteAttempt records what became of one attempt of a request: err is nil
// when GitHub answered (whatever the status). An attempt ended by its
// caller's context says nothing of GitHub.
func (c *Client) noteAttempt(ctx context.Context, method, path string, err error) {
	if err != nil && ctx.Err() != nil {
		return
	}
	c.hl.mu.Lock()
	was := c.hl.noAnswer
	if err != nil {
		c.hl.noAnswer = fmt.Errorf("GitHub did not answer %s %s: %w", method, path, err)
	} else {
		c.hl.noAnswer = nil
	}
	c.hl.mu.Unlock()
	switch {
	case err != nil && was == nil:
		c.log.Warn("github: no answer; the surface is unhealthy until GitHub answers", "method", method, "path", path, "err", err)
	case err == nil && was != nil:
		c.log.Info("github: GitHub answers again", "method", method, "path", path)
	}
}

// Health reports whether GitHub serves the client: nil while its last
// requests got answers and no repository's polls are refused, else why not.
// It makes no request.
func (c *Client) Health() error {
	return c.healthOf("")
}

// Health reports whether GitHub serves the surface: its client's requests
// get answers and its repository's polls are not refused
// (surfaces.HealthReporter).
func (s *Surface) Health() error {
	return s.c.healthOf(strings.ToLower(s.repo()))
}

// healthOf is the client's health, for one repository ("" for all).
func (c *Client) healthOf(repo string) error {
	c.hl.mu.Lock()
	defer c.hl.mu.Unlock()
	var errs []error
	if c.hl.noAnswer != nil {
		errs = append(errs, c.hl.noAnswer)
	}
	for r, rf := range c.hl.refused {
		if repo == "" || r == repo {
			errs = append(errs, fmt.Errorf("polling %s refused since %s: %w", r, rf.since.UTC().Format(time.RFC3339), rf.err))
		}
	}
	return errors.Join(errs...)
}

// refusedPoll reports whether a poll error is GitHub refusing the
// repository for good until someone acts: bad credentials (401), no access
// (403 that is no rate limit: the transport waited those out), the
// repository gone (404) or its issues disabled (410).
func refusedPoll(err error) bool {
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		switch er.Response.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusGone:
			return true
		}
	}
	return false
}

// pollRefused records that GitHub refuses repo's polls: the surface is
// unhealthy, and it is logged as an error when it starts and then once an
// hour, not at every interval.
func (c *Client) pollRefused(repo string, err error) {
	key := strings.ToLower(repo)
	now := c.now()
	c.hl.mu.Lock()
	if c.hl.refused == nil {
		c.hl.refused = make(map[string]*refusal)
	}
	rf := c.hl.refused[key]
	if rf == nil {
		rf = &refusal{since: now}
		c.hl.refused[key] = rf
	}
	rf.err = err
	logNow := rf.logged.IsZero() || now.Sub(rf.logged) >= refusalLogEvery
	if logNow {
		rf.logged = now
	}
	since := rf.since
	c.hl.mu.Unlock()
	if logNow {
		c.log.Error("github: GitHub refuses to list the repository's comments; the surface is unhealthy until it does (logged again every hour)",
			"repo", repo, "since", since.UTC().Format(time.RFC3339), "err", err)
	}
}

// pollServed records that a poll of repo succeeded.
func (c *Client) pollServed(repo string) {
	key := strings.ToLower(repo)
	c.hl.mu.Lock()
	rf := c.hl.refused[key]
	delete(c.hl.refused, key)
	c.hl.mu.Unlock()
	if rf != nil {
		c.log.Info("github: polling works again", "repo", repo, "refused_since", rf.since.UTC().Format(time.RFC3339))
	}
}

// cancelBody ends an attempt's context when its body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
