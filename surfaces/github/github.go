// Package github asks questions in GitHub issue comments and offers the
// answers people reply with to the store.
//
// One comment per question set, readable on its own, carries a hidden marker
// with the set's and its questions' IDs, so that asking again (a retry, a
// restart) finds it instead of posting twice. Replies on the same issue after
// it are read with the questions package; only people with write, maintain or
// admin permission, or on the allowlist, may answer. Each reply is decided
// once, ever, against the sets the issue shows waiting when it was posted
// (a question comment edited to show its answer records the reply that
// closed it), and the decision is kept in a Ledger (the store): live, after a
// restart and in any process, a reply means the same. Answers are found by
// polling the repository's issue comments (one conditional request per
// repository per interval, whatever the number of pending questions) or by
// the issue_comment webhook.
//
// A Client is one GitHub (base URL and credentials); the surfaces made from
// it share its pollers, one per repository, and its webhook handler.
package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces"
)

const surfaceName = "github"

// Compile-time checks that Surface provides what the run loop uses.
var (
	_ surfaces.Surface        = (*Surface)(nil)
	_ surfaces.HealthReporter = (*Surface)(nil)
	_ surfaces.Resolver       = (*Surface)(nil)
	_ surfaces.Reminder       = (*Surface)(nil)
	_ surfaces.ResumeNotifier = (*Surface)(nil)
	_ surfaces.Watcher        = (*Surface)(nil)
)

// Defaults.
const (
	DefaultBaseURL        = "https://api.github.com/"
	DefaultPollInterval   = 15 * time.Second
	DefaultPermissionTTL  = time.Minute
	DefaultMaxAnswerBytes = 8192
	DefaultWriteInterval  = time.Second
	// maxCached bounds the caches of where sets and runs were asked: an
	// entry dropped is found again on GitHub by its marker.
	maxCached = 1024
	// overlap is how far back each poll's since reaches before the newest
	// comment seen, for comments that show up in the listing late.
	overlap = 30 * time.Second
	// cursorStep is the least the since cursor moves by.
	cursorStep = 2 * time.Minute
)

// AppAuth authenticates as a GitHub App installation.
type AppAuth struct {
	ID             int64
	InstallationID int64
	// PrivateKeyFile is the app's PEM private key; PrivateKey, if set, is
	// used instead.
	PrivateKeyFile string
	PrivateKey     []byte
}

// ClientConfig says how to reach one GitHub.
type ClientConfig struct {
	// BaseURL is the REST API root: https://api.github.com/ (the default),
	// https://HOST/api/v3/ for GitHub Enterprise Server, or a test server.
	BaseURL string
	// Token is a personal access token (or any bearer token). Exactly one
	// of Token and App.
	Token string
	App   *AppAuth
	// PollInterval is how often each repository's comments are polled
	// while questions wait. Default 15s.
	PollInterval time.Duration
	// WebhookSecret verifies webhook deliveries; WebhookHandler refuses to
	// start without one.
	WebhookSecret string
	// OnIdleDelivery, if set, is called with the repository ("owner/name")
	// and the issue of a webhook delivery of a new comment that no Ask of
	// this client waits for: on a cluster, the Asks wait on another
	// instance (the leader), which the serve daemon nudges to read it at
	// once (PollNow). It is called after the delivery was answered, on a
	// goroutine that Close waits for: keep it short.
	OnIdleDelivery func(repo string, issue int)
	// PermissionTTL is how long a collaborator permission lookup is
	// trusted. Default one minute.
	PermissionTTL time.Duration
	// MaxRateLimitWait is the longest rate-limit wait sat out before an
	// API call fails instead. Default 15 minutes.
	MaxRateLimitWait time.Duration
	// ProgressInterval is the least time between two edits of a run's
	// status comment (SurfaceConfig.Progress). Default 10s.
	ProgressInterval time.Duration
	// WriteInterval is the least time between two content-creating requests
	// (posting or editing comments, opening issues, reacting), as GitHub
	// asks of integrations. Default one second; negative: no pacing (for
	// tests against a fake).
	WriteInterval time.Duration
	// Ledger keeps what became of each comment read as a possible answer,
	// durably, so that a restart neither decides a comment again nor posts
	// its notices twice (the store). Default: kept in memory, for this
	// process only.
	Ledger Ledger
	// Refs keeps, durably, where each set was asked, the sets waiting on
	// each issue and each repository's poll cursor (the store's refs of
	// the github surface), so that asking again after a restart finds the
	// question comments without listing their issue, and the first poll
	// reads only what changed since the last one (Refs). Default: none;
	// every Ask and Watch lists its issue's comments.
	Refs Refs
	// RequestTimeout bounds each request to GitHub (each attempt, from
	// sending it to reading its body): one that GitHub does not answer in
	// time fails, and the surface reports itself unhealthy (Health) until
	// GitHub answers again. Default DefaultRequestTimeout; negative: none.
	RequestTimeout time.Duration
	// HTTPClient sends the requests (its Transport is wrapped, not
	// changed). Default: a client with http.DefaultTransport.
	HTTPClient *http.Client
	Logger     *slog.Logger

	// Test hooks: the clock and the sleep used by polling and rate-limit
	// waits, and the first wait before retrying after a 5xx or a network
	// error (default one second).
	now     func() time.Time
	sleep   func(context.Context, time.Duration) error
	backoff time.Duration
}

// SurfaceConfig says where and from whom one surface takes answers.
type SurfaceConfig struct {
	// Repo is "owner/name".
	Repo string
	// Issue is the issue to ask in; 0 opens one issue per run (Set.RunID),
	// titled from Set.Title, found again after a restart by a hidden marker.
	Issue int
	// Labels are put on the issues opened per run.
	Labels []string
	// Allow lists logins that may answer besides those with write,
	// maintain or admin permission; with AllowOnly, only them.
	Allow     []string
	AllowOnly bool
	// MaxAnswerBytes bounds the comment read as an answer. Default 8192.
	MaxAnswerBytes int
	// Progress keeps one status comment per run on the run's issue: the
	// current step, tool uses and cost, edited at most every
	// ClientConfig.ProgressInterval, and a summary when the run ends.
	Progress bool
	// LeaveIssueOpen keeps a run's own issue (Issue 0) open when the run
	// ends; by default it is closed with a final comment (RunEnded).
	LeaveIssueOpen bool
}

// Config is ClientConfig and SurfaceConfig together, for New.
type Config struct {
	ClientConfig
	SurfaceConfig
}

// Surface returns a surface on one repository of c.
func (c *Client) Surface(cfg SurfaceConfig) (*Surface, error) {
	owner, name, ok := strings.Cut(cfg.Repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("github repo %q: want owner/name", cfg.Repo)
	}
	if cfg.Issue < 0 {
		return nil, fmt.Errorf("github issue %d: want a positive number, or 0 for one issue per run", cfg.Issue)
	}
	if cfg.AllowOnly && len(cfg.Allow) == 0 {
		return nil, errors.New("github allow_only is set but allow is empty: nobody could answer")
	}
	s := &Surface{c: c, owner: owner, name: name, cfg: cfg, allow: make(map[string]bool)}
	for _, l := range cfg.Allow {
		s.allow[strings.ToLower(strings.TrimPrefix(strings.TrimSpace(l), "@"))] = true
	}
	if s.cfg.MaxAnswerBytes <= 0 {
		s.cfg.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	return s, nil
}

// New returns a surface with a client of its own; closing the surface
// closes the client.
func New(cfg Config) (*Surface, error) {
	c, err := NewClient(cfg.ClientConfig)
	if err != nil {
		return nil, err
	}
	s, err := c.Surface(cfg.SurfaceConfig)
	if err != nil {
		c.Close()
		return nil, err
	}
	s.owns = true
	return s, nil
}

// Surface asks on one repository. Safe for concurrent use.
type Surface struct {
	c           *Client
	owner, name string
	cfg         SurfaceConfig
	allow       map[string]bool // lower-case logins
	owns        bool
}

// Name is "github".
func (s *Surface) Name() string { return surfaceName }

// Client returns the client the surface was made from.
func (s *Surface) Client() *Client { return s.c }

// WebhookHandler is the client's webhook handler.
func (s *Surface) WebhookHandler() (http.Handler, error) { return s.c.WebhookHandler() }

// Close closes the client if the surface has its own (New).
func (s *Surface) Close() error {
	if s.owns {
		return s.c.Close()
	}
	return nil
}

func (s *Surface) repo() string { return s.owner + "/" + s.name }

func (s *Surface) key(id string) string { return strings.ToLower(s.repo()) + "\x00" + id }
