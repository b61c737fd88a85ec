package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/github"
)

// reviewWindow is how long after its last change a run's pull request
// has its reviews polled (comments are polled for the whole repository).
const reviewWindow = 30 * 24 * time.Hour

// startReviewIntake starts the review loop (triggers.github.review): a
// comment starting with triggers.github.mention on a run's pull request,
// or a review requesting changes, by someone allowed to answer on
// surfaces.github, becomes a follow-up of the run (store.QueueFollowUp),
// which any instance then drives on. It watches every repository of
// triggers.github.repos (default surfaces.github.repo). It comes by the
// GitHub webhook when surfaces.github.webhook_secret is set, and by
// polling every surfaces.github.poll_interval until ctx ends, on one
// instance of a cluster at a time.
func (m *Main) startReviewIntake(ctx context.Context, st *store.Store, ss *surfaceSet) error {
	on, mention := m.Config.ReviewTrigger()
	if !on {
		return nil
	}
	gc := m.Config.Surfaces.GitHub
	repos := m.Config.TriggerRepos()
	if !gc.Enabled || len(repos) == 0 {
		return configError(errors.New("triggers.github.review: needs surfaces.github enabled, with its repo and token (the pull requests' repository) or triggers.github.repos"))
	}
	if m.github == nil {
		if _, err := ss.get("github", nil); err != nil {
			return configError(fmt.Errorf("triggers.github.review: surface github: %w", err))
		}
	}
	oldKeys := gc.Repo
	if !slices.ContainsFunc(repos, func(r string) bool { return strings.EqualFold(r, gc.Repo) }) {
		oldKeys = repos[0] // keys without a repository were of the one repository watched
	}
	for _, repo := range repos {
		rm := mention
		if rs, key := m.Config.TriggerRepoSettings(repo); key != "" {
			rm = rs.Mention // the repository's own (triggers.github.repos)
		}
		rv, err := m.github.Reviews(github.ReviewConfig{
			Repo: repo, Mention: rm, Allow: gc.Allow, AllowOnly: gc.AllowOnly,
			RunOfPR: st.RunOfPullRequest,
			Queue:   func(ctx context.Context, f github.Feedback) (bool, error) { return queueFeedback(ctx, st, f) },
			PullRequests: func(ctx context.Context, repo string) ([]int, error) {
				return st.RunPullRequests(ctx, repo, time.Now().Add(-reviewWindow))
			},
			OldKeys: strings.EqualFold(repo, oldKeys),
		})
		if err != nil {
			return configError(fmt.Errorf("triggers.github.review: %s: %w", repo, err))
		}
		m.reviews = append(m.reviews, rv)
		// One instance of a cluster polls each repository (a leadership
		// of its own), with a webhook too, as its safety net (a delivery
		// lost, or whose feedback could not be recorded then); a webhook
		// delivery is taken by whichever instance it reaches.
		go st.Lead(ctx, "review-poll "+strings.ToLower(repo), time.Second, func(lctx context.Context) { rv.Poll(lctx) })
	}
	m.Logger.Info("review loop on: comments on the runs' pull requests resume them", "repos", strings.Join(repos, ", "), "mention", mention,
		"webhook", gc.WebhookSecret != "")
	return nil
}

// queueFeedback records the review intake's f as a follow-up of its run,
// once per event: created false when it was already, under its key or
// under its old key (recorded before keys named the repository).
func queueFeedback(ctx context.Context, st *store.Store, f github.Feedback) (bool, error) {
	if f.OldKey != "" {
		fus, err := st.FollowUps(ctx, f.RunID)
		if err != nil {
			return false, err
		}
		if slices.ContainsFunc(fus, func(x store.FollowUp) bool { return x.EventKey == f.OldKey }) {
			return false, nil
		}
	}
	_, created, err := st.QueueFollowUp(ctx, f.RunID, f.Key, f.By, "github", f.Text, f.At)
	if errors.Is(err, store.ErrFollowUpRefused) {
		err = fmt.Errorf("%w: %v", github.ErrFeedbackRefused, err)
	}
	return created, err
}

// followUpStarted shows on the pull request comment a follow-up came from
// that the run's session resumed with it (🚀), when serve's review intake
// is on: the intake of the key's repository reacts.
func (m *Main) followUpStarted(ctx context.Context, f store.FollowUp) {
	for _, rv := range m.reviews {
		rv.Resumed(ctx, f.EventKey)
	}
}
