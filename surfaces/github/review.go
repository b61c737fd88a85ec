package github

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v60/github"
)

// The review loop's intake: a comment starting with the mention
// ("@orchestrator please also add a test") on a run's pull request — on
// its conversation (an issue comment), on its diff (a review comment), or
// a review that requests changes or whose body starts with the mention —
// by someone allowed to answer (write permission or the allow list; deny
// by default) becomes feedback on the run (ReviewConfig.Queue), which the
// orchestrator hands to the run's own CLI session. It comes by webhook
// (issue_comment, pull_request_review_comment, pull_request_review) or by
// polling (Reviews.Poll: the repository's review and issue comments since
// a cursor kept in Refs, conditional on their ETags, and the reviews of the
// runs' pull requests). Each event is recorded once under its key, which
// names the repository (github:pr-comment:<owner/name>:<id>,
// github:review-comment:…, github:review:…; the repository in lower case),
// however often it is delivered or listed; an edited or deleted comment
// starts nothing; a bot's is ignored; a stranger gets one reply. 👀 when
// the feedback is recorded, 🚀 when the session resumed with it
// (Surface.FollowUpResumed; a review has no reactions).

// Feedback is what the intake hands over: a run's pull request's comment.
type Feedback struct {
	RunID string
	Key   string // the event's key: the same event always has the same
	// OldKey is the key the event had before keys named the repository
	// (github:<kind>:<id>), set when ReviewConfig.OldKeys: feedback
	// recorded under it is this event's.
	OldKey string
	By     string // "@login"
	Text   string // the comment without the mention, as written (untrusted)
	At     time.Time
	Repo   string
	PR     int
}

// ReviewConfig is the review intake of one repository.
type ReviewConfig struct {
	Repo string // owner/name
	// Mention starts a comment meant for the orchestrator. Default
	// "@orchestrator".
	Mention string
	// Allow lists logins that may give feedback besides those with write,
	// maintain or admin permission; with AllowOnly, only them.
	Allow     []string
	AllowOnly bool
	// RunOfPR returns the run whose pull request is number pr of repo; ""
	// when it is none's.
	RunOfPR func(ctx context.Context, repo string, pr int) (string, error)
	// Queue records f, once per f.Key (created false when it was already);
	// an error that will not pass (the run was cancelled) wraps
	// ErrFeedbackRefused, and its author is told.
	Queue func(ctx context.Context, f Feedback) (created bool, err error)
	// PullRequests returns the open pull requests of runs in repo, whose
	// reviews Poll reads (nil: reviews come by webhook only).
	PullRequests func(ctx context.Context, repo string) ([]int, error)
	// OldKeys says that keys without a repository (github:<kind>:<id>,
	// recorded before keys named it) are this repository's: Feedback
	// carries its OldKey, and Resumed takes such keys. At most one
	// repository's intake (the one the loop watched then) sets it.
	OldKeys bool
}

// ErrFeedbackRefused: the run takes no feedback.
var ErrFeedbackRefused = errors.New("the run takes no feedback")

// DefaultMention starts a comment meant for the orchestrator.
const DefaultMention = "@orchestrator"

// Reviews is the review intake of one repository. Safe for concurrent use.
type Reviews struct {
	c           *Client
	owner, name string
	cfg         ReviewConfig
	allow       map[string]bool

	mu     sync.Mutex
	seen   map[string]bool   // event keys handled by this process
	etags  map[string]string // URL → ETag of its last listing
	cursor time.Time         // zero until read from Refs
}

// Reviews starts the review intake of a repository on c: the client's
// webhook handler then hands it the pull requests' comments and reviews.
func (c *Client) Reviews(cfg ReviewConfig) (*Reviews, error) {
	owner, name, ok := strings.Cut(cfg.Repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("github review intake: repo %q: want owner/name", cfg.Repo)
	}
	if cfg.RunOfPR == nil || cfg.Queue == nil {
		return nil, errors.New("github review intake: RunOfPR and Queue are required")
	}
	if cfg.AllowOnly && len(cfg.Allow) == 0 {
		return nil, errors.New("github review intake: allow_only is set but allow is empty: nobody could give feedback")
	}
	if strings.TrimSpace(cfg.Mention) == "" {
		cfg.Mention = DefaultMention
	}
	rv := &Reviews{c: c, owner: owner, name: name, cfg: cfg, allow: map[string]bool{}, seen: map[string]bool{}, etags: map[string]string{}}
	for _, l := range cfg.Allow {
		rv.allow[strings.ToLower(strings.TrimPrefix(strings.TrimSpace(l), "@"))] = true
	}
	c.mu.Lock()
	if c.reviews == nil {
		c.reviews = map[string]*Reviews{}
	}
	c.reviews[strings.ToLower(cfg.Repo)] = rv
	c.mu.Unlock()
	return rv, nil
}

func (rv *Reviews) repo() string { return rv.owner + "/" + rv.name }

// prEvent is a comment or review of a pull request, as either way of
// intake reads it.
type prEvent struct {
	kind  string // "pr-comment", "review-comment", "review"
	id    int64
	pr    int
	user  *gh.User
	body  string
	state string // a review's, in lower case
	at    time.Time
}

// key names e in repo: github:<kind>:<owner/name>:<id>.
func (e prEvent) key(repo string) string {
	return "github:" + e.kind + ":" + strings.ToLower(repo) + ":" + strconv.FormatInt(e.id, 10)
}

// oldKey is e's key of before keys named the repository.
func (e prEvent) oldKey() string { return "github:" + e.kind + ":" + strconv.FormatInt(e.id, 10) }

// feedbackText is the feedback e carries: its body after the mention; a
// review that requests changes carries its body (the mention, if any,
// taken off). ok is false when e is not meant for the orchestrator.
func (rv *Reviews) feedbackText(e prEvent) (string, bool) {
	body := strings.TrimSpace(e.body)
	rest, mentioned := cutMention(body, rv.cfg.Mention)
	switch {
	case mentioned:
		body = rest
	case e.kind == "review" && e.state == "changes_requested":
	default:
		return "", false
	}
	if body == "" {
		if e.kind == "review" && e.state == "changes_requested" {
			return "Changes were requested in a review (with no comment).", true
		}
		return "", false
	}
	return body, true
}

// cutMention reports whether body starts with mention (any case, then a
// space, a line end or nothing) and returns what follows it.
func cutMention(body, mention string) (string, bool) {
	if len(body) < len(mention) || !strings.EqualFold(body[:len(mention)], mention) {
		return "", false
	}
	rest := body[len(mention):]
	if rest != "" && !strings.ContainsAny(rest[:1], " \t\r\n,:") {
		return "", false // "@orchestrator-bot", another account
	}
	return strings.TrimSpace(strings.TrimLeft(rest, ",:")), true
}

// take decides about e: feedback recorded (true), or nothing to do, or a
// stranger told (also true: decided). false: try again later.
func (rv *Reviews) take(ctx context.Context, e prEvent) bool {
	key := e.key(rv.repo())
	rv.mu.Lock()
	done := rv.seen[key]
	rv.mu.Unlock()
	if done {
		return true
	}
	decided := rv.decide(ctx, e)
	if decided {
		rv.mu.Lock()
		if len(rv.seen) > maxDeliveries {
			rv.seen = map[string]bool{}
		}
		rv.seen[key] = true
		rv.mu.Unlock()
	}
	return decided
}

func (rv *Reviews) decide(ctx context.Context, e prEvent) bool {
	u := e.user
	if u == nil || u.GetLogin() == "" || u.GetType() == "Bot" || strings.HasSuffix(u.GetLogin(), "[bot]") {
		return true // bots are ignored
	}
	if isOwn(e.body) {
		if me, err := rv.c.self(ctx); err == nil && me.wrote(u) {
			return true // the orchestrator's own reply
		}
	}
	text, ok := rv.feedbackText(e)
	if !ok {
		return true
	}
	runID, err := rv.cfg.RunOfPR(ctx, rv.repo(), e.pr)
	if err != nil {
		rv.c.log.Warn("github: which run's pull request", "repo", rv.repo(), "pr", e.pr, "err", err)
		return false
	}
	if runID == "" {
		return true // not a run's pull request
	}
	login := u.GetLogin()
	allowed, err := rv.mayGiveFeedback(ctx, login)
	if err != nil {
		rv.c.log.Warn("github: permission lookup failed", "repo", rv.repo(), "login", login, "err", err)
		return false
	}
	if !allowed {
		rv.c.log.Info("github: feedback refused: not allowed", "repo", rv.repo(), "pr", e.pr, "login", login, "key", e.key(rv.repo()))
		rv.reply(ctx, e, fmt.Sprintf("@%s only people with write access to this repository (or on the orchestrator's allow list) can ask the orchestrator to go on with this pull request; nothing was started.", login))
		return true
	}
	f := Feedback{RunID: runID, Key: e.key(rv.repo()), By: "@" + login, Text: text, At: e.at, Repo: rv.repo(), PR: e.pr}
	if rv.cfg.OldKeys {
		f.OldKey = e.oldKey()
	}
	created, err := rv.cfg.Queue(ctx, f)
	if errors.Is(err, ErrFeedbackRefused) {
		rv.reply(ctx, e, fmt.Sprintf("@%s this run takes no more feedback (%v); nothing was started.", login, err))
		return true
	}
	if err != nil {
		rv.c.log.Warn("github: record feedback", "repo", rv.repo(), "pr", e.pr, "key", f.Key, "err", err)
		return false
	}
	if created {
		rv.c.log.Info("github: feedback taken", "repo", rv.repo(), "pr", e.pr, "run", runID, "key", f.Key, "by", f.By)
	}
	rctx, done := rv.c.accepted(ctx) // queued: its 👀 lands even if Close comes meanwhile
	rv.react(rctx, e.kind, e.id, "eyes")
	done()
	return true
}

// mayGiveFeedback: deny by default; write, maintain or admin permission,
// or the allow list (as for answers).
func (rv *Reviews) mayGiveFeedback(ctx context.Context, login string) (bool, error) {
	if rv.allow[strings.ToLower(login)] {
		return true, nil
	}
	if rv.cfg.AllowOnly {
		return false, nil
	}
	level, err := rv.c.permission(ctx, rv.owner, rv.name, login)
	if err != nil {
		return false, err
	}
	switch level {
	case "admin", "maintain", "write":
		return true, nil
	}
	return false, nil
}

// reply posts body on the pull request's conversation, at most once per
// event, whichever of this process's and other instances' takes of it
// (webhook, poll) get there: the first to record its claim in the Ledger
// posts; Refs keep that it was posted. The reply's records are the
// repository's and name the event by its old key (unique within the
// repository), so that a reply posted before keys named the repository
// is not posted again.
func (rv *Reviews) reply(ctx context.Context, e prEvent, body string) {
	rkey := noticeRefKey(rv.repo(), e.pr, e.oldKey())
	if rv.c.refs != nil {
		if _, ok, err := rv.c.refs.Ref(ctx, rkey); err == nil && ok {
			return // posted (Refs outlive a Ledger kept in memory)
		}
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	claim := "reply " + hex.EncodeToString(b[:])
	got, err := rv.c.ledger.DecideComment(ctx, "github-review/"+strings.ToLower(rv.repo())+"/reply/"+e.oldKey(), claim)
	if err != nil {
		rv.c.log.Warn("github: record a reply", "repo", rv.repo(), "key", e.key(rv.repo()), "err", err)
		return
	}
	if got != claim {
		return // told already, or being told by another take
	}
	body += "\n\n" + noticeMarker(e.oldKey())
	if _, _, err := rv.c.api.Issues.CreateComment(ctx, rv.owner, rv.name, e.pr, &gh.IssueComment{Body: gh.String(body)}); err != nil {
		rv.c.log.Warn("github: reply on the pull request", "repo", rv.repo(), "pr", e.pr, "err", err)
		return
	}
	if rv.c.refs != nil {
		if err := rv.c.refs.SetRef(ctx, rkey, "1"); err != nil {
			rv.c.log.Warn("github: record a reply", "key", rkey, "err", err)
		}
	}
}

// react puts content on the comment of kind with id (a review has none).
func (rv *Reviews) react(ctx context.Context, kind string, id int64, content string) {
	react(ctx, rv.c, rv.owner, rv.name, kind, id, content)
}

func react(ctx context.Context, c *Client, owner, name, kind string, id int64, content string) {
	var err error
	switch kind {
	case "pr-comment":
		_, _, err = c.api.Reactions.CreateIssueCommentReaction(ctx, owner, name, id, content)
	case "review-comment":
		_, _, err = c.api.Reactions.CreatePullRequestCommentReaction(ctx, owner, name, id, content)
	}
	if err != nil {
		c.log.Warn("github: react", "kind", kind, "comment", id, "content", content, "err", err)
	}
}

// FollowUpResumed shows on the comment that brought feedback (a key of
// this surface's: github:pr-comment:<owner/name>:<id> or
// github:review-comment:<owner/name>:<id>, in that repository; an old key
// without one, in the surface's) that the run's session resumed with it:
// 🚀. Other keys are ignored.
func (s *Surface) FollowUpResumed(ctx context.Context, key string) error {
	kind, repo, id, ok := parseFeedbackKey(key)
	if !ok {
		return nil
	}
	owner, name := s.owner, s.name
	if repo != "" {
		owner, name, _ = strings.Cut(repo, "/")
	}
	react(ctx, s.c, owner, name, kind, id, "rocket")
	return nil
}

// Resumed shows on the comment that brought feedback (its key) that the
// run's session resumed with it: 🚀. Keys of other repositories are
// ignored, and old keys (without a repository) unless ReviewConfig.OldKeys.
func (rv *Reviews) Resumed(ctx context.Context, key string) {
	kind, repo, id, ok := parseFeedbackKey(key)
	if !ok || (repo == "" && !rv.cfg.OldKeys) || (repo != "" && !strings.EqualFold(repo, rv.repo())) {
		return
	}
	rv.react(ctx, kind, id, "rocket")
}

// parseFeedbackKey reads a key of the review intake's:
// github:<kind>:<owner/name>:<id>, or github:<kind>:<id> (an old key,
// recorded before keys named the repository: repo "").
func parseFeedbackKey(key string) (kind, repo string, id int64, ok bool) {
	parts := strings.Split(key, ":")
	if len(parts) < 3 || len(parts) > 4 || parts[0] != "github" {
		return "", "", 0, false
	}
	switch parts[1] {
	case "pr-comment", "review-comment", "review":
	default:
		return "", "", 0, false
	}
	if len(parts) == 4 {
		repo = parts[2]
		if o, n, ok := strings.Cut(repo, "/"); !ok || o == "" || n == "" || strings.Contains(n, "/") {
			return "", "", 0, false
		}
	}
	id, err := strconv.ParseInt(parts[len(parts)-1], 10, 64)
	if err != nil || id <= 0 {
		return "", "", 0, false
	}
	return parts[1], repo, id, true
}

// takeReview handles a webhook delivery of a pull request's comment or
// review for the repository's review intake; false when it is none of
// the intake's (issue_comment on an issue, or no intake for the
// repository): the answers' handling goes on.
func (c *Client) takeReview(w http.ResponseWriter, event, delivery string, payload []byte) bool {
	var e prEvent
	var repo *gh.Repository
	switch event {
	case "issue_comment":
		var ev gh.IssueCommentEvent
		if json.Unmarshal(payload, &ev) != nil || ev.Issue == nil || !ev.Issue.IsPullRequest() {
			return false
		}
		if ev.GetAction() != "created" || ev.Comment == nil {
			return false // edits and deletions start nothing (the answers' side still sees them)
		}
		repo = ev.Repo
		e = prEvent{kind: "pr-comment", id: ev.GetComment().GetID(), pr: ev.GetIssue().GetNumber(), user: ev.GetComment().GetUser(),
			body: ev.GetComment().GetBody(), at: ev.GetComment().GetCreatedAt().Time}
	case "pull_request_review_comment":
		var ev gh.PullRequestReviewCommentEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			http.Error(w, "invalid pull_request_review_comment payload", http.StatusBadRequest)
			return true
		}
		if ev.GetAction() != "created" || ev.Comment == nil {
			w.WriteHeader(http.StatusNoContent)
			return true
		}
		repo = ev.Repo
		e = prEvent{kind: "review-comment", id: ev.GetComment().GetID(), pr: ev.GetPullRequest().GetNumber(), user: ev.GetComment().GetUser(),
			body: ev.GetComment().GetBody(), at: ev.GetComment().GetCreatedAt().Time}
	case "pull_request_review":
		var ev gh.PullRequestReviewEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			http.Error(w, "invalid pull_request_review payload", http.StatusBadRequest)
			return true
		}
		if ev.GetAction() != "submitted" || ev.Review == nil {
			w.WriteHeader(http.StatusNoContent)
			return true
		}
		repo = ev.Repo
		e = prEvent{kind: "review", id: ev.GetReview().GetID(), pr: ev.GetPullRequest().GetNumber(), user: ev.GetReview().GetUser(),
			body: ev.GetReview().GetBody(), state: strings.ToLower(ev.GetReview().GetState()), at: ev.GetReview().GetSubmittedAt().Time}
	default:
		return false
	}
	c.mu.Lock()
	rv := c.reviews[strings.ToLower(repo.GetFullName())]
	fresh := true
	if rv != nil && delivery != "" {
		fresh = c.deliveries.add(delivery)
	}
	c.mu.Unlock()
	if rv == nil {
		if event == "issue_comment" {
			return false
		}
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	if !fresh {
		w.WriteHeader(http.StatusOK) // a redelivery: already handled
		return true
	}
	w.WriteHeader(http.StatusAccepted)
	if c.ctx.Err() != nil {
		return true
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if !rv.take(c.ctx, e) {
			rv.c.log.Warn("github: feedback not decided; the next poll reads it again", "key", e.key(rv.repo()))
		}
	}()
	return true
}

// reviewCursorRefKey is where Refs keep the time up to which the review
// intake read the repository's comments and reviews.
func reviewCursorRefKey(repo string) string { return "review-cursor/" + strings.ToLower(repo) }

// Poll reads the repository's pull request comments and reviews every
// poll interval until ctx ends (for a deployment without webhooks, or as
// their safety net).
func (rv *Reviews) Poll(ctx context.Context) error {
	for {
		if err := rv.PollOnce(ctx); err != nil && ctx.Err() == nil {
			rv.c.log.Warn("github: poll the pull requests' comments", "repo", rv.repo(), "err", err)
		}
		if err := rv.c.sleep(ctx, rv.c.interval); err != nil {
			return ctx.Err()
		}
	}
}

// PollOnce reads once what was written since the cursor: the repository's
// review comments and issue comments (those on a run's pull request are
// taken; edited ones are left: an edit starts nothing), and the reviews of
// the runs' pull requests; each listing is conditional on its last ETag.
// The cursor moves to the newest time read (less overlap), and is kept
// in Refs.
func (rv *Reviews) PollOnce(ctx context.Context) error {
	since, err := rv.since(ctx)
	if err != nil {
		return err
	}
	newest := since
	undecided := false
	q := fmt.Sprintf("sort=updated&direction=asc&per_page=100&since=%s", since.UTC().Format(time.RFC3339))
	var rcs []*gh.PullRequestComment
	if err := rv.list(ctx, fmt.Sprintf("repos/%s/%s/pulls/comments?%s", rv.owner, rv.name, q), &rcs); err != nil {
		return err
	}
	for _, c := range rcs {
		newest = later(newest, c.GetUpdatedAt().Time)
		if c.GetUpdatedAt().Time.After(c.GetCreatedAt().Time) {
			continue // edited: starts nothing
		}
		e := prEvent{kind: "review-comment", id: c.GetID(), pr: prNumber(c.GetPullRequestURL()), user: c.GetUser(), body: c.GetBody(), at: c.GetCreatedAt().Time}
		undecided = !rv.take(ctx, e) || undecided
	}
	var ics []*gh.IssueComment
	if err := rv.list(ctx, fmt.Sprintf("repos/%s/%s/issues/comments?%s", rv.owner, rv.name, q), &ics); err != nil {
		return err
	}
	for _, c := range ics {
		newest = later(newest, c.GetUpdatedAt().Time)
		if _, mention := cutMention(strings.TrimSpace(c.GetBody()), rv.cfg.Mention); !mention || c.GetUpdatedAt().Time.After(c.GetCreatedAt().Time) {
			continue // edited, or not a mention: no lookup of its issue
		}
		e := prEvent{kind: "pr-comment", id: c.GetID(), pr: issueNumber(c.GetIssueURL()), user: c.GetUser(), body: c.GetBody(), at: c.GetCreatedAt().Time}
		undecided = !rv.take(ctx, e) || undecided
	}
	if rv.cfg.PullRequests != nil {
		prs, err := rv.cfg.PullRequests(ctx, rv.repo())
		if err != nil {
			return err
		}
		for _, n := range prs {
			var rs []*gh.PullRequestReview
			if err := rv.list(ctx, fmt.Sprintf("repos/%s/%s/pulls/%d/reviews?per_page=100", rv.owner, rv.name, n), &rs); err != nil {
				return err
			}
			for _, r := range rs {
				at := r.GetSubmittedAt().Time
				if at.Before(since) {
					continue // read before the cursor
				}
				newest = later(newest, at)
				e := prEvent{kind: "review", id: r.GetID(), pr: n, user: r.GetUser(), body: r.GetBody(), state: strings.ToLower(r.GetState()), at: at}
				undecided = !rv.take(ctx, e) || undecided
			}
		}
	}
	// It reaches back overlap before the newest time read, for what shows
	// in a listing late (and a clock ahead): what is read again was
	// decided already, and its keys make deciding again a no-op.
	newest = newest.Add(-overlap).UTC().Truncate(time.Second)
	if undecided || !newest.After(since) {
		return nil // read again from the same cursor
	}
	rv.mu.Lock()
	rv.cursor = newest
	rv.mu.Unlock()
	if rv.c.refs != nil {
		if err := rv.c.refs.SetRef(ctx, reviewCursorRefKey(rv.repo()), newest.UTC().Format(time.RFC3339)); err != nil {
			return fmt.Errorf("keep the review cursor: %w", err)
		}
	}
	return nil
}

// since is the cursor: this process's, else the one Refs keep, else now
// (what was written before the intake first ran is not feedback for it).
func (rv *Reviews) since(ctx context.Context) (time.Time, error) {
	rv.mu.Lock()
	cur := rv.cursor
	rv.mu.Unlock()
	if !cur.IsZero() {
		return cur, nil
	}
	if rv.c.refs != nil {
		v, ok, err := rv.c.refs.Ref(ctx, reviewCursorRefKey(rv.repo()))
		if err != nil {
			return time.Time{}, err
		}
		if ok {
			if t, err := time.Parse(time.RFC3339, v); err == nil {
				cur = t
			}
		}
	}
	if cur.IsZero() {
		cur = rv.c.now().UTC().Truncate(time.Second)
		if rv.c.refs != nil {
			if err := rv.c.refs.SetRef(ctx, reviewCursorRefKey(rv.repo()), cur.Format(time.RFC3339)); err != nil {
				return time.Time{}, err
			}
		}
	}
	rv.mu.Lock()
	rv.cursor = cur
	rv.mu.Unlock()
	return cur, nil
}

// list reads every page of u into out (a pointer to a slice), sending the
// ETag of its last listing: unchanged (304), out stays empty.
func (rv *Reviews) list(ctx context.Context, u string, out any) error {
	rv.mu.Lock()
	etag := rv.etags[u]
	rv.mu.Unlock()
	req, err := rv.c.api.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := rv.c.api.Do(ctx, req, out)
	if resp != nil && resp.StatusCode == http.StatusNotModified {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", strings.SplitN(u, "?", 2)[0], err)
	}
	if resp.NextPage == 0 {
		rv.mu.Lock()
		rv.etags[u] = resp.Header.Get("ETag")
		rv.mu.Unlock()
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// prNumber is the number at the end of a pull request's API URL.
func prNumber(u string) int {
	n, _ := strconv.Atoi(u[strings.LastIndexByte(u, '/')+1:])
	return n
}
