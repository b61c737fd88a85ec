package daemon

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestGitHubNudgeTopic: a nudge names a repository and an issue, and only
// such a topic is read as one.
func TestGitHubNudgeTopic(t *testing.T) {
	t.Parallel()
	repo, issue, ok := parseGitHubNudge(githubNudge("acme/app", 12))
	if !ok || repo != "acme/app" || issue != 12 {
		t.Fatalf("round trip: %q %d %v", repo, issue, ok)
	}
	for _, topic := range []string{"", "github:", "github:acme/app", "github:#3", "github:acme/app#0", "github:acme/app#x", "discord:acme/app#3"} {
		if repo, issue, ok := parseGitHubNudge(topic); ok {
			t.Errorf("parseGitHubNudge(%q) = %q, %d, true; want not a nudge", topic, repo, issue)
		}
	}
}

// pollRecorder is a GitHubPoller that records what it is asked to poll.
type pollRecorder chan string

func (p pollRecorder) PollNow(repo string, issue int) { p <- githubNudge(repo, issue) }

// TestNudgeGitHubPollsAtAnotherInstance: on a shared store, a webhook
// delivery nobody waits for at one instance (NudgeGitHub) makes the poller
// of another instance poll that repository at once; other topics do not.
func TestNudgeGitHubPollsAtAnotherInstance(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	ctx := context.Background()
	open := func() *store.Store {
		st, err := store.OpenDatabase(ctx, t.TempDir(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b := open(), open()
	polls := make(pollRecorder, 16)
	stop := PollGitHubWhenNudged(b, polls, slog.New(slog.DiscardHandler))
	defer stop()
	if err := a.Nudge(ctx, "discord:acme/app#3"); err != nil {
		t.Fatal(err)
	}
	nudge := NudgeGitHub(a, slog.New(slog.DiscardHandler))
	nudge("acme/app", 7)
	select {
	case got := <-polls:
		if got != "github:acme/app#7" {
			t.Errorf("polled %q, want github:acme/app#7", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("no poll a minute after the nudge")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(polls) != 0 {
		t.Errorf("polled %q too", <-polls)
	}
}
