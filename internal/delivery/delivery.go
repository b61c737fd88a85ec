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
	// RemoteRepo, when set ("owner/name"), is the repository the
	// checkout's remote must be (a run started from that repository's
	// issue): Workdir fails, before the run's first turn, when the
	// remote's fetch or push URL names another repository or there is no
	// remote (RemoteRepoError), rather than push to the wrong place.
	RemoteRepo string
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
	// Closes is the issue the pull request closes when merged, "#7" or
	// "owner/name#7" (a run started from that issue); its body says
	// "Closes #7".
	Closes string
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
	// <AwayBase>/worktrees/<name>-<hash of Root> instead. Empty: such a Root
	// is an error.
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
