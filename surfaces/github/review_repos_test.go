package github

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// reposSink stands for the store with runs in several repositories: a
// run per (repository, pull request), feedback recorded once per key.
type reposSink struct {
	runs map[string]string // "owner/name#pr" → run
	mu   sync.Mutex
	got  []Feedback
	keys map[string]bool
}

func (k *reposSink) runOfPR(_ context.Context, repo string, pr int) (string, error) {
	return k.runs[strings.ToLower(repo)+"#"+itoa(pr)], nil
}

func (k *reposSink) queue(_ context.Context, f Feedback) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys[f.Key] {
		return false, nil
	}
	k.keys[f.Key] = true
	k.got = append(k.got, f)
	return true, nil
}

func (k *reposSink) feedback() []Feedback {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.got)
}

// TestReviewLoopWatchesEveryRepository: with an intake for each of two
// repositories, the comments on the runs' pull requests of each (by
// webhook and by polling) become feedback of the run of that repository,
// under keys that name it; 👀 and 🚀 go on the comment in its own
// repository; an old key (without a repository) is read as the one
// repository's that had such keys, and no other intake's.
func TestReviewLoopWatchesEveryRepository(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	const libRepo = "acme/Lib"
	f := newFixture(t)
	f.srv.SetPermission("orchestrator-bot", "write")
	appPR := f.srv.OpenPullRequest(testRepo, "orchestrator-bot", "orchestrator/r1", "the app's run")
	// The same number in both repositories: only the repository tells
	// them apart.
	libPR := f.srv.OpenPullRequest(libRepo, "orchestrator-bot", "orchestrator/r2", "the lib's run")
	if appPR != libPR {
		t.Fatalf("pull requests %d and %d: the test wants one number in both repositories", appPR, libPR)
	}
	sink := &reposSink{runs: map[string]string{testRepo + "#" + itoa(appPR): "r-app", "acme/lib#" + itoa(libPR): "r-lib"}, keys: map[string]bool{}}
	cfg := f.config(0).ClientConfig
	cfg.WebhookSecret = secret
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	intake := func(repo string, pr int, oldKeys bool) *Reviews {
		rv, err := c.Reviews(ReviewConfig{Repo: repo, RunOfPR: sink.runOfPR, Queue: sink.queue, OldKeys: oldKeys,
			PullRequests: func(context.Context, string) ([]int, error) { return []int{pr}, nil }})
		if err != nil {
			t.Fatal(err)
		}
		return rv
	}
	app := intake(testRepo, appPR, true)
	lib := intake(libRepo, libPR, false)
	ctx := context.Background()
	if err := lib.PollOnce(ctx); err != nil { // the lib's cursor: now
		t.Fatal(err)
	}

	// By webhook: a comment on each repository's pull request.
	appComment := f.srv.AddPRComment(testRepo, appPR, "alice", "@orchestrator rename the flag")
	libReview := f.srv.AddReviewComment(libRepo, libPR, "alice", "lib.go", "@orchestrator add a test")
	if code := deliver(t, c, secret, "issue_comment", "d1", f.srv.PRCommentEvent(testRepo, appComment, "created")); code != http.StatusAccepted {
		t.Fatalf("app delivery: status %d", code)
	}
	if code := deliver(t, c, secret, "pull_request_review_comment", "d2", f.srv.ReviewCommentEvent(libRepo, libReview, "created")); code != http.StatusAccepted {
		t.Fatalf("lib delivery: status %d", code)
	}
	f.srv.WaitFor(t, waitLong, "the feedback of both repositories and its 👀", func() bool {
		return len(sink.feedback()) == 2 && len(f.srv.Reactions(testRepo, appComment)) == 1 && len(f.srv.ReviewCommentReactions(libRepo, libReview)) == 1
	})
	// By polling, the lib's intake (a comment written after its cursor's
	// second is listed; the webhook's is recognised by its key).
	libLater := f.srv.AddPRComment(libRepo, libPR, "alice", "@orchestrator and the docs")
	f.srv.WaitFor(t, waitLong, "the polled lib comment", func() bool {
		if err := lib.PollOnce(ctx); err != nil {
			t.Error(err)
			return true
		}
		return len(sink.feedback()) == 3
	})
	byKey := map[string]Feedback{}
	for _, fb := range sink.feedback() {
		byKey[fb.Key] = fb
	}
	for key, want := range map[string]struct {
		run, repo, oldKey string
	}{
		"github:pr-comment:acme/app:" + itoa64(appComment):    {"r-app", testRepo, "github:pr-comment:" + itoa64(appComment)},
		"github:review-comment:acme/lib:" + itoa64(libReview): {"r-lib", libRepo, ""},
		"github:pr-comment:acme/lib:" + itoa64(libLater):      {"r-lib", libRepo, ""},
	} {
		fb, ok := byKey[key]
		if !ok || fb.RunID != want.run || fb.Repo != want.repo || fb.OldKey != want.oldKey {
			t.Errorf("feedback %s = %+v (found %v), want run %s of %s, old key %q", key, fb, ok, want.run, want.repo, want.oldKey)
		}
	}
	if got := f.srv.Reactions(libRepo, libLater); !slices.Equal(got, []string{"eyes"}) {
		t.Errorf("reactions on the polled lib comment: %v", got)
	}

	// 🚀, by the intakes: each reacts to its repository's keys only.
	libKey := "github:review-comment:acme/lib:" + itoa64(libReview)
	app.Resumed(ctx, libKey)
	if got := f.srv.ReviewCommentReactions(libRepo, libReview); slices.Contains(got, "rocket") {
		t.Errorf("the app's intake reacted to the lib's key: %v", got)
	}
	lib.Resumed(ctx, libKey)
	// An old key is the app's (OldKeys): the lib's intake leaves it.
	oldKey := "github:pr-comment:" + itoa64(appComment)
	lib.Resumed(ctx, oldKey)
	if got := f.srv.Reactions(testRepo, appComment); slices.Contains(got, "rocket") {
		t.Errorf("the lib's intake reacted to an old key: %v", got)
	}
	app.Resumed(ctx, oldKey)
	// By a run's surface pointed at the app: the key names the lib.
	s := f.surface(t, f.config(1))
	if err := s.FollowUpResumed(ctx, "github:pr-comment:acme/lib:"+itoa64(libLater)); err != nil {
		t.Fatal(err)
	}
	f.srv.WaitFor(t, waitLong, "🚀 on each comment in its repository", func() bool {
		return slices.Contains(f.srv.ReviewCommentReactions(libRepo, libReview), "rocket") &&
			slices.Contains(f.srv.Reactions(testRepo, appComment), "rocket") &&
			slices.Contains(f.srv.Reactions(libRepo, libLater), "rocket")
	})
	for _, r := range f.srv.Requests() {
		if strings.Contains(r.Path, "/reactions") && r.Status >= 400 {
			t.Errorf("reaction request %s %s answered %d", r.Method, r.Path, r.Status)
		}
	}
}

func TestParseFeedbackKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key, kind, repo string
		id              int64
		ok              bool
	}{
		{"github:pr-comment:acme/app:12", "pr-comment", "acme/app", 12, true},
		{"github:review-comment:acme/lib:7", "review-comment", "acme/lib", 7, true},
		{"github:review:acme/app:3", "review", "acme/app", 3, true},
		{"github:pr-comment:12", "pr-comment", "", 12, true}, // an old key
		{"github:acme/app:comment:12", "", "", 0, false},     // an issue trigger's
		{"github:pr-comment:acme:12", "", "", 0, false},
		{"github:pr-comment:acme/app:0", "", "", 0, false},
		{"discord:pr-comment:12", "", "", 0, false},
		{"github:pr-comment", "", "", 0, false},
	} {
		kind, repo, id, ok := parseFeedbackKey(tc.key)
		if kind != tc.kind || repo != tc.repo || id != tc.id || ok != tc.ok {
			t.Errorf("parseFeedbackKey(%q) = %q %q %d %v, want %q %q %d %v", tc.key, kind, repo, id, ok, tc.kind, tc.repo, tc.id, tc.ok)
		}
	}
}
