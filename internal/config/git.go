package config

import (
	"fmt"
	"strings"
)

// Git is the configuration's git section: how runs deliver their work as a
// branch, a commit, a push and a pull request (internal/delivery). A spec's
// own git section overrides it key by key; `run --git` turns it on for one
// run.
type Git struct {
	// Enabled delivers every run through git, not only those whose spec
	// has a git section or that were started with --git.
	Enabled bool `yaml:"enabled"`
	// Base is the branch to start from. Default: the remote's default
	// branch, else the checkout's current branch.
	Base string `yaml:"base"`
	// Branch is the run's branch; {spec}, {run} and {date} are filled in.
	// Default: "orchestrator/{spec}/{run}".
	Branch string `yaml:"branch"`
	// Remote is the remote fetched from and pushed to. Default: origin.
	Remote string `yaml:"remote"`
	// Push pushes the branch after the commit. Default: true when a pull
	// request is configured, else false.
	Push *bool `yaml:"push"`
	// Repo is the GitHub repository (owner/name) of the pull request.
	// Default: surfaces.github.repo.
	Repo string `yaml:"repo"`
	// Token authenticates pushes over HTTPS (handed to git by an askpass
	// helper, never in a URL or an argument) and the pull request's API
	// calls. Default: surfaces.github.token.
	Token string `yaml:"token"`
	// PullRequest opens one pull request per run when enabled (a spec opens
	// one when its git section has the key pull_request).
	PullRequest GitPullRequest `yaml:"pull_request"`
	// AuthorName and AuthorEmail are the commit's author and committer.
	// Default: orchestrator <orchestrator@localhost>.
	AuthorName  string `yaml:"author_name"`
	AuthorEmail string `yaml:"author_email"`
	// MaxFileSize holds back from delivery a file the run adds or changes
	// that is larger than this, as a secret is: the run asks whether to
	// deliver without it. Default: 50MiB (GitHub refuses files over 100 MiB).
	MaxFileSize ByteSize `yaml:"max_file_size"`
	// KeepWorktrees is how long `orchestrator gc` keeps the worktrees of
	// ended runs (failed runs keep theirs for inspection). Default: 168h.
	KeepWorktrees Duration `yaml:"keep_worktrees"`
}

// GitPullRequest is how the pull request is opened.
type GitPullRequest struct {
	Enabled   bool     `yaml:"enabled"`
	Draft     bool     `yaml:"draft"`
	Reviewers []string `yaml:"reviewers"`
	Labels    []string `yaml:"labels"`
}

// DefaultMaxFileSize is git.max_file_size when not set.
const DefaultMaxFileSize = ByteSize(50 << 20)

// DefaultKeepWorktrees is git.keep_worktrees when not set.
const DefaultKeepWorktrees = Duration(7 * 24 * 60 * 60 * 1e9)

// HasPullRequest reports whether the configuration opens pull requests.
func (c *Config) HasPullRequest() bool { return c.Git.PullRequest.Enabled }

// validateGit checks the git section.
func (c *Config) validateGit(add func(key, format string, args ...any)) {
	g := c.Git
	if g.Repo != "" {
		if o, n, ok := strings.Cut(g.Repo, "/"); !ok || o == "" || n == "" || strings.Contains(n, "/") {
			add("git.repo", "%q is not owner/name", g.Repo)
		}
	}
	if strings.ContainsAny(g.Branch, " ~^:?*[\\") || strings.Contains(g.Branch, "..") || strings.HasPrefix(g.Branch, "-") {
		add("git.branch", "%q is not a usable branch name", g.Branch)
	}
	if g.MaxFileSize <= 0 {
		add("git.max_file_size", "must be more than 0 bytes, got %s", g.MaxFileSize)
	}
	if g.KeepWorktrees < 0 {
		add("git.keep_worktrees", "must not be negative, got %s", g.KeepWorktrees)
	}
	if c.HasPullRequest() && g.Push != nil && !*g.Push {
		add("git.push", "false cannot open a pull request (git.pull_request): it needs the branch on the remote")
	}
	for i, r := range g.PullRequest.Reviewers {
		if strings.TrimSpace(r) == "" {
			add(fmt.Sprintf("git.pull_request.reviewers[%d]", i), "empty")
		}
	}
	for i, l := range g.PullRequest.Labels {
		if strings.TrimSpace(l) == "" {
			add(fmt.Sprintf("git.pull_request.labels[%d]", i), "empty")
		}
	}
}
