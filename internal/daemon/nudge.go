package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// On a shared store, the instance that asks a run's questions on GitHub
// (the leader) is the one whose poller waits for the answers, but GitHub
// sends a webhook delivery to whichever instance the load balancer picks.
// An instance where nothing waits for the comment nudges every instance
// (store.Nudge) with its repository and issue, and the instances poll that
// repository at once if they wait there (GitHubPoller.PollNow): the
// answer is read within a moment instead of at the next poll_interval.
// cmd wires NudgeGitHub as the GitHub client's OnIdleDelivery and
// PollGitHubWhenNudged beside the client.

// nudgeTimeout bounds the NOTIFY of a nudge (a hint: the poll is the
// fallback, and Close waits for it).
const nudgeTimeout = 5 * time.Second

// GitHubPoller polls a repository at once (github.Client).
type GitHubPoller interface {
	PollNow(repo string, issue int)
}

// githubNudge is the nudge topic of a comment on issue of repo.
func githubNudge(repo string, issue int) string {
	return fmt.Sprintf("github:%s#%d", repo, issue)
}

// parseGitHubNudge reads a githubNudge topic; ok is false for any other.
func parseGitHubNudge(topic string) (repo string, issue int, ok bool) {
	rest, ok := strings.CutPrefix(topic, "github:")
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '#')
	if i <= 0 {
		return "", 0, false
	}
	issue, err := strconv.Atoi(rest[i+1:])
	if err != nil || issue <= 0 {
		return "", 0, false
	}
	return rest[:i], issue, true
}

// NudgeGitHub is the GitHub client's OnIdleDelivery on a shared store: it
// nudges every instance with the repository and issue of a delivery
// nobody here waits for. A failed nudge is logged to log; the asking
// instance then reads the comment at its next poll.
func NudgeGitHub(st *store.Store, log *slog.Logger) func(repo string, issue int) {
	return func(repo string, issue int) {
		ctx, cancel := context.WithTimeout(context.Background(), nudgeTimeout)
		defer cancel()
		if err := st.Nudge(ctx, githubNudge(repo, issue)); err != nil {
			log.Warn("github webhook: could not nudge the other instances; the asking instance reads the comment at its next poll",
				"repo", repo, "issue", issue, "err", err)
		}
	}
}

// PollGitHubWhenNudged has p poll a repository at once when a nudge names
// it, until the returned function (a closer) is called. Without the
// listener (the database refused it), answers by webhook at another
// instance wait for the poll: that is logged to log.
func PollGitHubWhenNudged(st *store.Store, p GitHubPoller, log *slog.Logger) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	nudges, err := st.Nudges(ctx)
	if err != nil {
		cancel()
		log.Warn("github: not listening for other instances' webhook deliveries; their answers wait for the next poll", "err", err)
		return func() error { return nil }
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for topic := range nudges {
			if repo, issue, ok := parseGitHubNudge(topic); ok {
				p.PollNow(repo, issue)
			}
		}
	}()
	return func() error {
		cancel()
		<-done
		return nil
	}
}
