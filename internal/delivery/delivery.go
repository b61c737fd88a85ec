// Package delivery carries a run's work to people as a reviewable change:
// a git worktree and branch of its own, a commit, a push and one pull
// request whose body holds the run's decision log.
//
// Before the first turn, Workdir fetches the remote (when there is one) and
// adds a worktree for the run under the state directory, on a new branch
// from the base; the agent CLI runs there. The person's checkout, its branch
// and its index are never touched. After the last turn, Deliver commits what
// changed, pushes the branch and opens (or updates) the pull request. Every
// step is recorded in the store once done (store.Delivery), so a process
// that dies between two steps is replaced by one that goes on from the next,
// and retries are idempotent: a pull request already open for the branch is
// updated, never duplicated, and one whose creation got no answer is found
// by its branch. A push or a pull request that fails for a reason that may
// pass (Transient) is tried again a few times; if it still fails, the
// delivery is left pending (store.Delivery.Pending) for a later attempt,
// and the run is done all the same.
//
// Git is run as the git binary. A token for pushing over HTTPS is handed to
// git through an askpass helper and the environment of that one command:
// never in its arguments, the remote's URL, a log, or the agent's
// environment. Every git command runs guarded (Git), and what the agent
// can change in the worktree cannot redirect our commit and push
// (gitguard.go).
package delivery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/retry"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Options is how one run is delivered (a spec's or the configuration's git
// section).
type Options struct {
	// Base is the branch to start from; empty: the remote's default branch,
	// else the checkout's current branch.
	Base string
	// Branch is the run's branch, with {spec}, {run} and {date} filled in
	// (default "orchestrator/{spec}/{run}").
	Branch string
	// Remote is the remote to fetch from and push to (default "origin").
	Remote string
	// Push pushes the branch after the commit.
	Push bool
	// PullRequest, when set, opens a pull request in Repo.
	PullRequest *PROptions
	// Repo is "owner/name", where the pull request is opened.
	Repo string
	// AuthorName and AuthorEmail are the commit's author and committer
	// (default "orchestrator <orchestrator@localhost>").
	AuthorName  string
	AuthorEmail string
	// MaxFileSize holds back from delivery a file larger than this, in
	// bytes, as a secret is (default DefaultMaxFileSize; secrets.go).
	MaxFileSize int64

	leaveOut bool // DeliverWithout
}

// PROptions says how the pull request is opened.
type PROptions struct {
	Draft     bool
	Reviewers []string
	Labels    []string
}

// DefaultBranch is the branch template when none is configured.
const DefaultBranch = "orchestrator/{spec}/{run}"

// Config is what a Deliverer is made of.
type Config struct {
	Store *store.Store
	// Root is where worktrees are added (default <state>/worktrees). A
	// Root inside a git checkout (state_dir: ./state in a repository) is
	// never used: a worktree is never created inside a checkout, and
	// a folder of AwayBase is used instead.
	Root string
	// AwayBase is the user's state directory (the default state_dir,
	// $XDG_STATE_HOME/orchestrator or ~/.local/state/orchestrator): when
	// Root is inside a git checkout, worktrees go to
	// <AwayBase>/worktrees/<name>-<hash of Root> instead. Empty: taken from
	// this process's environment.
	AwayBase string
	Git      Git
	// Token authenticates pushes over HTTPS (askpass); empty: git's own
	// credentials.
	Token string
	// PRs opens pull requests; nil when none can be opened.
	PRs PullRequests
	// RunIssue returns the number of a run's question issue in the pull
	// request's repository (0: none); nil when there is none.
	RunIssue func(ctx context.Context, runID string) (int, error)
	// LocalWorkDir returns where this instance has the run's workdir when
	// that is not where the run's creator had it (run.WorkDir): several
	// instances on one machine, each with its own clone. nil or "": the
	// run's workdir (instances configured the same way).
	LocalWorkDir func(run store.Run) string
	Logger       *slog.Logger
	Now          func() time.Time
	// Attempts is how many times Deliver tries a push or a pull request
	// that fails for a reason that may pass (Transient) before it leaves
	// the delivery pending (default 3); Backoff is the first wait between
	// two (default 2 seconds), doubling, with jitter.
	Attempts int
	Backoff  time.Duration
	// RetryAfter is the first wait before a pending delivery is tried
	// again (default 1 minute), doubling with each attempt up to
	// RetryMax (default 1 hour), with jitter.
	RetryAfter time.Duration
	RetryMax   time.Duration
	// Sleep waits (default: a timer, or until ctx ends).
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter spreads a wait, never shortening it (default: up to half of
	// it more).
	Jitter func(time.Duration) time.Duration
}

// Deliverer delivers runs. It is safe for concurrent use on different runs;
// each run is delivered by the one process that drives it.
type Deliverer struct {
	cfg Config
	log *slog.Logger
}

// New returns a Deliverer.
func New(cfg Config) (*Deliverer, error) {
	if cfg.Store == nil {
		return nil, errors.New("delivery: a store is required")
	}
	if cfg.Root == "" {
		cfg.Root = filepath.Join(cfg.Store.Dir(), "worktrees")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	root, err := rootOutsideCheckouts(cfg.Root, cfg.AwayBase)
	if err != nil {
		return nil, fmt.Errorf("delivery: %w", err)
	}
	if root != cfg.Root {
		cfg.Logger.Info("the state directory is inside a git checkout: run worktrees are kept outside it", "inside", cfg.Root, "worktrees", root)
		cfg.Root = root
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 3
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 2 * time.Second
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = time.Minute
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = time.Hour
	}
	if cfg.Sleep == nil {
		cfg.Sleep = retry.Sleep
	}
	if cfg.Jitter == nil {
		cfg.Jitter = retry.Jitter
	}
	if cfg.Git.Home == "" {
		// A HOME of git's own, empty: no one's global configuration.
		home := filepath.Join(cfg.Root, ".git-home")
		if err := os.MkdirAll(home, 0o700); err != nil {
			return nil, fmt.Errorf("delivery: %w", err)
		}
		cfg.Git.Home = home
	}
	// git and ssh are found on PATH now, before any agent runs: a
	// directory of PATH the agent can write cannot put its own in their
	// place later.
	if !filepath.IsAbs(cfg.Git.Bin) {
		if p, err := exec.LookPath(cmp.Or(cfg.Git.Bin, "git")); err == nil {
			cfg.Git.Bin = p
		}
	}
	if cfg.Git.SSH == "" {
		if p, err := exec.LookPath("ssh"); err == nil {
			cfg.Git.SSH = p
		}
	}
	return &Deliverer{cfg: cfg, log: cfg.Logger}, nil
}

func (o Options) withDefaults() Options {
	if o.Branch == "" {
		o.Branch = DefaultBranch
	}
	if o.Remote == "" {
		o.Remote = "origin"
	}
	if o.AuthorName == "" {
		o.AuthorName = "orchestrator"
	}
	if o.AuthorEmail == "" {
		o.AuthorEmail = "orchestrator@localhost"
	}
	return o
}

// BranchName fills in a branch template.
func BranchName(tmpl string, run store.Run) string {
	spec := run.Spec
	if spec == "" {
		spec = "prompt"
	}
	date := run.CreatedAt
	if date.IsZero() {
		date = time.Now()
	}
	return strings.NewReplacer("{spec}", spec, "{run}", run.ID, "{date}", date.UTC().Format("2006-01-02")).Replace(tmpl)
}

// Workdir returns the directory the run's turns run in: its worktree (the
// run's workdir's place in it), added on first use. A run whose worktree is
// gone (a restart on a cleaned machine) gets it back, from its branch if it
// still exists, else from its pushed branch, else from the base. A run
// another instance drove and parked (Park) continues here from the work in
// progress it pushed (see here).
func (d *Deliverer) Workdir(ctx context.Context, run store.Run, o Options) (string, error) {
	o = o.withDefaults()
	g := d.cfg.Git
	dl, ok, err := d.cfg.Store.Delivery(ctx, run.ID)
	if err != nil {
		return "", err
	}
	if ok {
		if !dl.RemovedAt.IsZero() {
			return "", fmt.Errorf("run %s: its worktree %s was removed", run.ID, dl.Worktree)
		}
		if dl, err = d.here(ctx, run, dl, o); err != nil {
			return "", err
		}
		if err := d.refresh(ctx, run, dl, o); err != nil {
			return "", err
		}
		return subdir(dl.Worktree, dl.RepoDir, d.localWorkDir(run)), nil
	}
	workdir := d.localWorkDir(run)
	top, err := g.toplevel(ctx, workdir)
	if err != nil {
		return "", err
	}
	// The remote's URLs are read now, before the agent runs; every fetch
	// and push of the run goes to them (gitguard.go).
	gd, _, err := d.guardFor(ctx, run.ID, top, o.Remote)
	if err != nil {
		return "", err
	}
	remote := gd.FetchURL != ""
	if remote {
		if err := d.fetch(ctx, gd, top, "+refs/heads/*:refs/remotes/"+o.Remote+"/*"); err != nil {
			return "", fmt.Errorf("fetch %s: %w", o.Remote, err)
		}
	}
	base := o.Base
	if base == "" {
		base, err = d.defaultBase(ctx, top, o.Remote, gd)
		if err != nil {
			return "", err
		}
	}
	var baseCommit string
	var found bool
	if remote {
		baseCommit, found = g.resolve(ctx, top, "refs/remotes/"+o.Remote+"/"+base)
	}
	if !found {
		baseCommit, found = g.resolve(ctx, top, base)
	}
	if !found {
		return "", fmt.Errorf("base branch %q: no such branch in %s (on %s or locally); set git.base", base, top, o.Remote)
	}
	branch := BranchName(o.Branch, run)
	if _, err := g.run(ctx, top, nil, "", "check-ref-format", "--branch", branch); err != nil {
		return "", fmt.Errorf("branch %q (from git.branch %q) is not a valid branch name", branch, o.Branch)
	}
	wt := d.worktreePath(run.ID)
	if err := os.MkdirAll(d.cfg.Root, 0o700); err != nil {
		return "", fmt.Errorf("worktrees: %w", err)
	}
	if _, err := g.run(ctx, top, nil, "", "worktree", "add", "--quiet", "--no-track", "-b", branch, wt, baseCommit); err != nil {
		return "", fmt.Errorf("add the run's worktree: %w", err)
	}
	if _, err := d.record(ctx, gd, top, wt, false); err != nil {
		return "", err
	}
	dl = store.Delivery{RunID: run.ID, RepoDir: top, Worktree: wt, Branch: branch, Base: base, BaseCommit: baseCommit,
		State: store.DeliveryPrepared}
	if err := d.cfg.Store.SaveDelivery(ctx, dl); err != nil {
		return "", err
	}
	d.log.Info("worktree added", "run", run.ID, "worktree", wt, "branch", branch, "base", base)
	return subdir(wt, top, workdir), nil
}

// subdir is where workdir (inside the checkout top) is in the worktree wt.
func subdir(wt, top, workdir string) string {
	rel, err := filepath.Rel(top, workdir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		if a, errA := filepath.EvalSymlinks(top); errA == nil {
			if b, errB := filepath.EvalSymlinks(workdir); errB == nil {
				if r2, err := filepath.Rel(a, b); err == nil && r2 != "." && !strings.HasPrefix(r2, "..") {
					return filepath.Join(wt, r2)
				}
			}
		}
		return wt
	}
	return filepath.Join(wt, rel)
}

func (d *Deliverer) defaultBase(ctx context.Context, top, remote string, gd store.GitGuard) (string, error) {
	g := d.cfg.Git
	if gd.FetchURL != "" {
		if ref, err := g.run(ctx, top, nil, "", "symbolic-ref", "--quiet", "refs/remotes/"+remote+"/HEAD"); err == nil {
			return strings.TrimPrefix(ref, "refs/remotes/"+remote+"/"), nil
		}
		if name, ok := d.remoteHead(ctx, gd); ok {
			return name, nil
		}
	}
	cur, err := g.run(ctx, top, nil, "", "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil || cur == "" {
		return "", fmt.Errorf("no base branch: %s has no default branch on %s and no current branch; set git.base", top, remote)
	}
	return cur, nil
}

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
		if dl, err = d.here(ctx, run, dl, o); err != nil {
			return Result{Delivery: dl}, err
		}
		gd, err := d.verify(ctx, run, dl, o)
		if err != nil {
			return Result{Delivery: dl}, err
		}
		env := wtEnv(gd, dl)
		status, err := g.run(ctx, dl.Worktree, env, "", "status", "--porcelain", "--untracked-files=all")
		if err != nil {
			return Result{Delivery: dl}, err
		}
		head, _ := g.resolveWith(ctx, dl.Worktree, env, "HEAD")
		if status == "" && head == dl.BaseCommit {
			dl.State, dl.Note = store.DeliveryUnchanged, "no change: nothing committed, no pull request"
			if err := d.cfg.Store.SaveDelivery(ctx, dl); err != nil {
				return Result{Delivery: dl}, err
			}
			return Result{Delivery: dl}, nil
		}
		// Secrets and oversized files are held back (secrets.go).
		staged, err := d.screen(ctx, run, dl, o, env, o.leaveOut)
		if err != nil {
			return Result{Delivery: dl}, err
		}
		if o.Push {
			// Until the push, the commit is on this machine only: the run
			// stays here (released once pushed).
			if err := d.cfg.Store.SetRunHost(ctx, run.ID, store.Hostname()); err != nil {
				return Result{Delivery: dl}, err
			}
		}
		if staged {
			rep, err := d.report(ctx, run, "")
			if err != nil {
				return Result{Delivery: dl}, err
			}
			if _, err := g.run(ctx, dl.Worktree, append(env, authorEnv(o)...), rep.CommitMessage(), "commit", "--quiet", "--no-verify", "--file", "-"); err != nil {
				return Result{Delivery: dl}, fmt.Errorf("commit the run's changes: %w", err)
			}
		}
		dl.CommitSHA, _ = g.resolveWith(ctx, dl.Worktree, env, "HEAD")
		if dl.CommitSHA == dl.BaseCommit { // all of it was left out
			dl.State, dl.Note = store.DeliveryUnchanged, "no change left to deliver once the files held back were left out: nothing committed, no pull request"
			if err := d.cfg.Store.SaveDelivery(ctx, dl); err != nil {
				return Result{Delivery: dl}, err
			}
			return Result{Delivery: dl}, nil
		}
		dl.State = store.DeliveryCommitted
		if err := d.cfg.Store.SaveDelivery(ctx, dl); err != nil {
			return Result{Delivery: dl}, err
		}
		d.log.Info("committed", "run", run.ID, "branch", dl.Branch, "commit", dl.CommitSHA)
		failpoint(FailpointCommitted)
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
	case strings.Contains(low, "authentication") || strings.Contains(low, "could not read username") || strings.Contains(low, "403") ||
		strings.Contains(low, "401") || strings.Contains(low, "permission") || strings.Contains(low, "denied"):
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

// Finish ends a run's delivery: the worktree of a run that ended done is
// removed (with its branch when the run changed nothing); a failed or
// cancelled run's is kept for inspection until gc.
func (d *Deliverer) Finish(ctx context.Context, run store.Run) error {
	if run.Status != store.RunDone {
		return nil
	}
	dl, ok, err := d.cfg.Store.Delivery(ctx, run.ID)
	if err != nil || !ok || !dl.RemovedAt.IsZero() || dl.Pending {
		// A pending delivery keeps the worktree it pushes from.
		return err
	}
	return d.remove(ctx, dl)
}

func (d *Deliverer) remove(ctx context.Context, dl store.Delivery) error {
	g := d.cfg.Git
	if _, err := os.Lstat(dl.Worktree); err == nil {
		if _, err := g.run(ctx, dl.RepoDir, nil, "", "worktree", "remove", "--force", "--force", dl.Worktree); err != nil {
			if rerr := os.RemoveAll(dl.Worktree); rerr != nil {
				return fmt.Errorf("remove worktree %s: %w", dl.Worktree, err)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove worktree %s: %w", dl.Worktree, err)
	}
	// Removed is what is gone, not what a command said it did.
	if _, err := os.Lstat(dl.Worktree); !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			err = errors.New("it is still there after git worktree remove")
		}
		return fmt.Errorf("remove worktree %s: %w", dl.Worktree, err)
	}
	g.run(ctx, dl.RepoDir, nil, "", "worktree", "prune")
	os.RemoveAll(filepath.Join(d.cfg.Root, ".remotes", dl.RunID+".git"))
	if dl.State == store.DeliveryUnchanged || dl.State == store.DeliveryPrepared {
		// The branch holds nothing of the run's: drop it.
		g.run(ctx, dl.RepoDir, nil, "", "branch", "--quiet", "-D", dl.Branch)
	}
	dl.RemovedAt = d.cfg.Now()
	return d.cfg.Store.SaveDelivery(ctx, dl)
}

// Removed is a worktree GC removed.
type Removed struct {
	RunID    string
	Worktree string
	Status   store.RunStatus
}

// GC removes the worktrees of runs that ended (done, failed or cancelled)
// more than olderThan ago, then runs `git worktree prune` in each checkout
// they came from.
func (d *Deliverer) GC(ctx context.Context, olderThan time.Duration) ([]Removed, error) {
	kept, err := d.cfg.Store.KeptWorktrees(ctx)
	if err != nil {
		return nil, err
	}
	cutoff := d.cfg.Now().Add(-olderThan)
	var out []Removed
	var errs []error
	repos := map[string]bool{}
	for _, k := range kept {
		repos[k.Delivery.RepoDir] = true
		if !k.Run.Status.Final() || k.Run.UpdatedAt.After(cutoff) || k.Delivery.Pending {
			continue
		}
		if err := d.remove(ctx, k.Delivery); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, Removed{RunID: k.Run.ID, Worktree: k.Delivery.Worktree, Status: k.Run.Status})
	}
	for dir := range repos {
		if _, err := os.Stat(dir); err == nil {
			if _, err := d.cfg.Git.run(ctx, dir, nil, "", "worktree", "prune"); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return out, errors.Join(errs...)
}
