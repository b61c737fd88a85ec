package delivery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/retry"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Result says what Deliver did.
type Result struct {
	Delivery store.Delivery
	// Changed is false when the run left the tree as it found it.
	Changed bool
	// Pending is set when the push or the pull request still failed after
	// its retries (Delivery.Pending): the work is committed, and the
	// delivery is tried again later.
	Pending bool
}

// Line says what was delivered, in one line for people.
func (r Result) Line() string {
	dl := r.Delivery
	switch {
	case !r.Changed:
		return "no change: nothing committed, no pull request"
	case r.Pending:
		what := "push"
		if dl.Pushed {
			what = "pull request"
		}
		return fmt.Sprintf("delivery pending: the %s failed (%s); committed on branch %s (commit %.12s), tried again by serve from %s, or now by `orchestrator resume %s`",
			what, lastLines(dl.LastError, 1), dl.Branch, dl.CommitSHA, dl.NextAttemptAt.UTC().Format(time.RFC3339), dl.RunID)
	case dl.PRURL != "":
		return fmt.Sprintf("pull request %s (branch %s, commit %.12s)", dl.PRURL, dl.Branch, dl.CommitSHA)
	case dl.Pushed:
		return fmt.Sprintf("pushed branch %s (commit %.12s)", dl.Branch, dl.CommitSHA)
	default:
		return fmt.Sprintf("committed on branch %s (commit %.12s, not pushed) in %s", dl.Branch, dl.CommitSHA, dl.RepoDir)
	}
}

// ErrPushFailed: a push failed for a reason that may pass (the remote
// unreachable, a server error), unlike ErrPushRejected.
var ErrPushFailed = errors.New("push failed")

// Failpoints Deliver passes, in order, after recording each step.
const (
	FailpointCommitted = "delivery-committed"
	FailpointPushed    = "delivery-pushed"
)

// Deliver commits the run's changes, pushes its branch and opens its pull
// request, going on from the last step recorded. failpoint (may be nil) is
// called after each recorded step (see the Failpoint constants).
func (d *Deliverer) Deliver(ctx context.Context, run store.Run, o Options, failpoint func(string)) (Result, error) {
	o = o.withDefaults()
	if failpoint == nil {
		failpoint = func(string) {}
	}
	dl, ok, err := d.cfg.Store.Delivery(ctx, run.ID)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return Result{}, fmt.Errorf("run %s has no worktree to deliver", run.ID)
	}
	g := d.cfg.Git
	if dl.State == store.DeliveryUnchanged {
		return Result{Delivery: dl}, nil
	}
	if dl.State == store.DeliveryPrepared {
		if dl, err = d.commit(ctx, run, dl, o, failpoint); err != nil || dl.State == store.DeliveryUnchanged {
			return Result{Delivery: dl}, err
		}
	}
	res := Result{Delivery: dl, Changed: true}
	if !o.Push {
		return res, nil
	}
	if dl.State == store.DeliveryCommitted && !g.isWorktree(ctx, dl.Worktree) {
		// The commit is in the worktree it was made in, on another
		// machine (the run stays with its host).
		return res, fmt.Errorf("run %s: its commit %.12s is in the worktree %s, not on this machine; the instance there pushes it: %w",
			run.ID, dl.CommitSHA, dl.Worktree, store.ErrWorkElsewhere)
	}
	err = d.ship(ctx, run, o, &dl, failpoint)
	res.Delivery = dl
	if err == nil {
		if dl.Pending {
			dl.Pending, dl.NextAttemptAt, dl.LastError = false, time.Time{}, ""
			if err := d.cfg.Store.SaveDelivery(ctx, dl); err != nil {
				return res, err
			}
			res.Delivery = dl
		}
		return res, nil
	}
	if ctx.Err() != nil || !Transient(err) {
		return res, err
	}
	return d.pend(ctx, run, dl, err)
}

// commit makes the run's commit from its prepared worktree (made this
// instance's first, see here) and records it (store.DeliveryCommitted),
// then calls failpoint. A run that changed nothing, or whose every change
// was held back (secrets.go), is recorded as store.DeliveryUnchanged
// instead, with nothing committed. The delivery is returned as it now is,
// also with an error.
func (d *Deliverer) commit(ctx context.Context, run store.Run, dl store.Delivery, o Options, failpoint func(string)) (store.Delivery, error) {
	g := d.cfg.Git
	dl, err := d.here(ctx, run, dl, o)
	if err != nil {
		return dl, err
	}
	gd, err := d.verify(ctx, run, dl, o)
	if err != nil {
		return dl, err
	}
	env := wtEnv(gd, dl)
	status, err := g.run(ctx, dl.Worktree, env, "", "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return dl, err
	}
	head, _ := g.resolveWith(ctx, dl.Worktree, env, "HEAD")
	if status == "" && head == dl.BaseCommit {
		dl.State, dl.Note = store.DeliveryUnchanged, "no change: nothing committed, no pull request"
		if err := d.cfg.Store.SaveDelivery(ctx, dl); err != nil {
			return dl, err
		}
		return dl, nil
	}
	// Secrets and oversized files are held back (secrets.go).
	staged, err := d.screen(ctx, run, dl, o, env, o.leaveOut)
	if err != nil {
		return dl, err
	}
	if o.Push {
		// Until the push, the commit is on this machine only: the run
		// stays here (released once pushed).
		if err := d.cfg.Store.SetRunHost(ctx, run.ID, store.Hostname()); err != nil {
			return dl, err
		}
	}
	if staged {
		rep, err := d.report(ctx, run, "")
		if err != nil {
			return dl, err
		}
		if _, err := g.run(ctx, dl.Worktree, append(env, authorEnv(o)...), rep.CommitMessage(), "commit", "--quiet", "--no-verify", "--file", "-"); err != nil {
			return dl, fmt.Errorf("commit the run's changes: %w", err)
		}
	}
	dl.CommitSHA, _ = g.resolveWith(ctx, dl.Worktree, env, "HEAD")
	if dl.CommitSHA == dl.BaseCommit { // all of it was left out
		dl.State, dl.Note = store.DeliveryUnchanged, "no change left to deliver once the files held back were left out: nothing committed, no pull request"
		if err := d.cfg.Store.SaveDelivery(ctx, dl); err != nil {
			return dl, err
		}
		return dl, nil
	}
	dl.State = store.DeliveryCommitted
	if err := d.cfg.Store.SaveDelivery(ctx, dl); err != nil {
		return dl, err
	}
	d.log.Info("committed", "run", run.ID, "branch", dl.Branch, "commit", dl.CommitSHA)
	failpoint(FailpointCommitted)
	return dl, nil
}

// pend records a delivery whose push or pull request failed for a reason
// that may pass (err) as pending, to be tried again after a backoff: the
// work is committed, so the run is done all the same.
func (d *Deliverer) pend(ctx context.Context, run store.Run, dl store.Delivery, err error) (Result, error) {
	res := Result{Delivery: dl, Changed: true}
	// The work is committed (and perhaps pushed): the run is done, its
	// delivery pending, tried again later (serve) or at once (resume).
	dl.Pending, dl.LastError = true, err.Error()
	dl.Attempts++
	later := retry.Backoff{Initial: d.cfg.RetryAfter, Max: d.cfg.RetryMax, Jitter: d.cfg.Jitter}
	dl.NextAttemptAt = d.cfg.Now().Add(later.Wait(dl.Attempts - 1))
	if err := d.cfg.Store.SaveDelivery(ctx, dl); err != nil {
		return res, err
	}
	res.Delivery, res.Pending = dl, true
	d.log.Warn("delivery pending", "run", run.ID, "state", dl.State, "attempts", dl.Attempts, "next", dl.NextAttemptAt, "err", err)
	return res, nil
}

// ship pushes the committed branch, opens the pull request and links it
// from the run's question issue, going on from the step recorded in dl. A
// push or a pull request that fails for a reason that may pass is tried
// again (Config.Attempts, Config.Backoff) before ship gives up.
func (d *Deliverer) ship(ctx context.Context, run store.Run, o Options, dl *store.Delivery, failpoint func(string)) error {
	if dl.State == store.DeliveryCommitted {
		if err := d.retry(ctx, run.ID, "push", func() error { return d.push(ctx, run, *dl, o) }); err != nil {
			return err
		}
		dl.Pushed, dl.State = true, store.DeliveryPushed
		if err := d.cfg.Store.SaveDelivery(ctx, *dl); err != nil {
			return err
		}
		if err := d.cfg.Store.ReleaseRunHost(ctx, run.ID, store.Hostname()); err != nil {
			return err
		}
		d.log.Info("pushed", "run", run.ID, "remote", o.Remote, "branch", dl.Branch)
		failpoint(FailpointPushed)
	}
	if o.PullRequest == nil || dl.State == store.DeliveryOpened && (dl.Commented || dl.PRNumber == 0) {
		return nil
	}
	if d.cfg.PRs == nil || o.Repo == "" {
		return errors.New("a pull request is configured (git.pull_request) but no GitHub repository: set surfaces.github.repo or git.repo, and a token")
	}
	issue := 0
	issueURL := ""
	if d.cfg.RunIssue != nil {
		if n, err := d.cfg.RunIssue(ctx, run.ID); err != nil {
			d.log.Warn("the run's question issue", "run", run.ID, "err", err)
		} else if n > 0 {
			issue = n
			if u, err := d.cfg.PRs.IssueURL(ctx, o.Repo, n); err == nil {
				issueURL = u
			}
		}
	}
	if dl.State != store.DeliveryOpened {
		rep, err := d.report(ctx, run, issueURL)
		if err != nil {
			return err
		}
		rep.Closes = o.PullRequest.Closes
		base := dl.Base
		if o.Base != "" {
			base = o.Base
		}
		req := PRRequest{Repo: o.Repo, Head: dl.Branch, Base: base, Title: rep.PRTitle(), Body: rep.PRBody(),
			Draft: o.PullRequest.Draft, Reviewers: o.PullRequest.Reviewers, Labels: o.PullRequest.Labels}
		var pr PullRequest
		err = d.retry(ctx, run.ID, "open the pull request", func() error {
			var err error
			pr, err = d.cfg.PRs.Open(ctx, req)
			if pr.Number != 0 {
				if err != nil {
					d.log.Warn("pull request opened, but", "run", run.ID, "pr", pr.URL, "err", err)
				}
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
		dl.PRNumber, dl.PRURL, dl.State = pr.Number, pr.URL, store.DeliveryOpened
		if err := d.cfg.Store.SaveDelivery(ctx, *dl); err != nil {
			return err
		}
		d.log.Info("pull request opened", "run", run.ID, "pr", pr.URL)
	}
	if issue > 0 && !dl.Commented {
		body := fmt.Sprintf("The run's work is in pull request %s (branch `%s`).", dl.PRURL, strings.ReplaceAll(dl.Branch, "`", "'"))
		if err := d.cfg.PRs.Comment(ctx, o.Repo, issue, body); err != nil {
			d.log.Warn("comment on the run's question issue", "run", run.ID, "err", err)
		} else {
			dl.Commented = true
			if err := d.cfg.Store.SaveDelivery(ctx, *dl); err != nil {
				return err
			}
		}
	}
	return nil
}

// retry calls fn until it succeeds, fails for a reason that will not pass
// (Transient), or Config.Attempts are spent, waiting Config.Backoff
// (doubling, with jitter) between two.
func (d *Deliverer) retry(ctx context.Context, runID, what string, fn func() error) error {
	b := retry.Backoff{Initial: d.cfg.Backoff, Max: d.cfg.Backoff << 10, Jitter: d.cfg.Jitter}
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !Transient(err) || attempt >= d.cfg.Attempts || ctx.Err() != nil {
			return err
		}
		wait := b.Next()
		d.log.Info("delivery: trying again", "run", runID, "step", what, "attempt", attempt, "wait", wait, "err", err)
		if err := d.cfg.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// report gathers what the commit and the pull request say about the run.
func (d *Deliverer) report(ctx context.Context, run store.Run, issueURL string) (Report, error) {
	st := d.cfg.Store
	decisions, err := st.DecisionLog(ctx, run.ID)
	if err != nil {
		return Report{}, err
	}
	turns, err := st.Turns(ctx, run.ID)
	if err != nil {
		return Report{}, err
	}
	r := Report{RunID: run.ID, Spec: run.Spec, Title: run.Title, Summary: run.FinalText, Decisions: decisions, IssueURL: issueURL}
	var end time.Time
	for _, t := range turns {
		r.Turns++
		r.CostUSD += t.Result.CostUSD
		if t.Result.FinalText != "" {
			r.Summary = t.Result.FinalText
		}
		if t.FinishedAt.After(end) {
			end = t.FinishedAt
		}
	}
	if end.IsZero() {
		end = d.cfg.Now()
	}
	r.Duration = end.Sub(run.CreatedAt)
	return r, nil
}

// push pushes the worktree's HEAD to the run's branch at the push URL
// recorded when the worktree was added, never forcing, once the worktree
// is verified to be the run's (gitguard.go). A token is handed to git by
// an askpass helper that reads it from this one command's environment.
func (d *Deliverer) push(ctx context.Context, run store.Run, dl store.Delivery, o Options) error {
	gd, err := d.verify(ctx, run, dl, o)
	if err != nil {
		return err
	}
	head, ok := d.cfg.Git.resolveWith(ctx, dl.Worktree, wtEnv(gd, dl), "HEAD")
	if !ok {
		return fmt.Errorf("push branch %s: the run's worktree %s has no commit", dl.Branch, dl.Worktree)
	}
	err = d.pushCommit(ctx, gd, head, dl.Branch)
	if err == nil {
		return nil
	}
	var ge *gitError
	msg := err.Error()
	if errors.As(err, &ge) {
		// --porcelain reports each ref on stdout ("!	src:dst	[rejected] (fetch first)").
		var lines []string
		for _, l := range strings.Split(ge.stdout+"\n"+ge.stderr, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "hint:") && !strings.HasPrefix(l, "To ") && l != "Done" {
				lines = append(lines, l)
			}
		}
		msg = redactURLs(strings.Join(lines, "\n"), ge.args)
	}
	low := strings.ToLower(msg)
	switch {
	case strings.Contains(low, "non-fast-forward") || strings.Contains(low, "fetch first") || strings.Contains(low, "[rejected]"):
		return fmt.Errorf("%w: branch %s on %s has commits the run's branch does not (not a fast-forward); the worktree %s is kept: %s",
			ErrPushRejected, dl.Branch, o.Remote, dl.Worktree, lastLines(msg, 3))
	case strings.Contains(low, "authentication") || strings.Contains(low, "could not read username") || httpAuthStatus.MatchString(low) ||
		strings.Contains(low, "permission") || strings.Contains(low, "denied"):
		return fmt.Errorf("%w: %s refused the credentials (check git.token or surfaces.github.token, and its Contents: write permission); the worktree %s is kept: %s",
			ErrPushRejected, o.Remote, dl.Worktree, lastLines(msg, 3))
	default:
		return fmt.Errorf("%w: push branch %s to %s; the worktree %s is kept: %s", ErrPushFailed, dl.Branch, o.Remote, dl.Worktree, lastLines(msg, 3))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}

// askpass is the helper git asks for a username and a password: the token
// comes from the environment of the one git command that needs it.
const askpass = `#!/bin/sh
case "$1" in
Username*) echo "x-access-token" ;;
*) printf '%s\n' "$ORCHESTRATOR_GIT_TOKEN" ;;
esac
`

// authEnv is the environment that hands the token to git, if there is one.
func (d *Deliverer) authEnv() []string {
	if d.cfg.Token == "" {
		return nil
	}
	p := filepath.Join(d.cfg.Root, ".askpass")
	if b, err := os.ReadFile(p); err != nil || string(b) != askpass {
		if err := os.MkdirAll(d.cfg.Root, 0o700); err == nil {
			tmp := p + ".tmp"
			if os.WriteFile(tmp, []byte(askpass), 0o700) == nil {
				os.Rename(tmp, p)
			}
		}
	}
	return []string{"GIT_ASKPASS=" + p, "ORCHESTRATOR_GIT_TOKEN=" + d.cfg.Token}
}

// httpAuthStatus finds an HTTP 401 or 403 in git's output as a word of its
// own: the digits inside a path or a hash (a temporary directory's
// "…4037471851") are not a refusal.
var httpAuthStatus = regexp.MustCompile(`\b40[13]\b`)
