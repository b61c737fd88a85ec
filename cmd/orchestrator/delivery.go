package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/delivery"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/specs"
	"github.com/orchestrator-dev/orchestrator/surfaces/github"
)

// This file wires the delivery of a run's work through git: the
// configuration's git section, a spec's, and `run --git` become a
// delivery.Options per run, behind the runner's Delivery interface.

// deliveryOptions merges the configuration's git section and a spec's; ok is
// false when the run is not delivered through git.
func (m *Main) deliveryOptions(sp *specs.Spec, o runOptions) (delivery.Options, bool) {
	g := m.Config.Git
	if !g.Enabled && !o.Git && (sp == nil || sp.Git == nil) {
		return delivery.Options{}, false
	}
	opts := delivery.Options{Base: g.Base, Branch: g.Branch, Remote: g.Remote, Repo: g.Repo,
		AuthorName: g.AuthorName, AuthorEmail: g.AuthorEmail, MaxFileSize: int64(g.MaxFileSize)}
	if opts.Repo == "" {
		opts.Repo = m.Config.Surfaces.GitHub.Repo
	}
	if g.PullRequest.Enabled {
		opts.PullRequest = &delivery.PROptions{Draft: g.PullRequest.Draft, Reviewers: g.PullRequest.Reviewers, Labels: g.PullRequest.Labels}
	}
	push := g.Push
	if sp != nil && sp.Git != nil {
		s := sp.Git
		if s.Base != "" {
			opts.Base = s.Base
		}
		if s.Branch != "" {
			opts.Branch = s.Branch
		}
		if s.Repo != "" {
			opts.Repo = s.Repo
		} else {
			for _, ref := range sp.Surfaces {
				if g, ok := ref.Override.Value.(*config.GitHub); ok && g.Repo != "" {
					opts.Repo = g.Repo
				}
			}
		}
		if s.PullRequest != nil {
			opts.PullRequest = &delivery.PROptions{Draft: s.PullRequest.Draft, Reviewers: s.PullRequest.Reviewers, Labels: s.PullRequest.Labels}
		}
		if s.Push != nil {
			push = s.Push
		}
	}
	if push != nil {
		opts.Push = *push
	} else {
		opts.Push = opts.PullRequest != nil
	}
	if o.Issue != nil && o.Issue.Repo != "" {
		// A run started from an issue delivers to the issue's repository,
		// whatever the configuration's (triggers.go), from a checkout of it.
		opts.Repo, opts.RemoteRepo = o.Issue.Repo, o.Issue.Repo
	}
	if opts.PullRequest != nil {
		opts.PullRequest.Closes = triggerCloses(o, opts.Repo) // triggers.go
	}
	return opts, true
}

// gitToken is the token pushes and pull requests use.
func (m *Main) gitToken() string {
	if m.Config.Git.Token != "" {
		return m.Config.Git.Token
	}
	return m.Config.Surfaces.GitHub.Token
}

// deliverer returns the process's Deliverer, built on first use.
func (m *Main) deliverer(st *store.Store, ss *surfaceSet) (*delivery.Deliverer, error) {
	m.deliveryOnce.Do(func() {
		cfg := delivery.Config{Store: st, Token: m.gitToken(), Logger: m.Logger.With("part", "delivery"),
			Backoff: m.deliveryRetry, RetryAfter: m.deliveryRetry,
			// A state_dir inside the checkout: worktrees go to the user's.
			AwayBase: config.DefaultStateDir(m.LookupEnv)}
		gc := m.Config.Surfaces.GitHub
		if tok := m.gitToken(); tok != "" {
			// The surface's handling of GitHub's rate limits and transient
			// failures, over the process's instrumented transport. A limit
			// longer than MaxWait is not waited out here: the delivery is
			// left pending, and tried again later.
			var base http.RoundTripper = http.DefaultTransport
			if m.metrics != nil {
				base = m.metrics.InstrumentTransport("github", base)
			}
			hc := &http.Client{Timeout: 10 * time.Minute, Transport: github.Transport(github.TransportConfig{
				Base: &timeoutTransport{base: base, timeout: 30 * time.Second}, Logger: m.Logger.With("part", "delivery"),
				MaxWait: 2 * time.Minute})}
			prs, err := delivery.NewGitHub(delivery.GitHubConfig{BaseURL: gc.BaseURL, Token: tok, HTTPClient: hc})
			if err != nil {
				m.deliveryErr = err
				return
			}
			cfg.PRs = prs
		}
		if ss != nil {
			cfg.RunIssue = func(ctx context.Context, runID string) (int, error) {
				return m.runIssue(ctx, st, ss, runID)
			}
		}
		m.deliveryD, m.deliveryErr = delivery.New(cfg)
	})
	return m.deliveryD, m.deliveryErr
}

// runIssue finds the run's question issue through its GitHub surface, when
// it asks on GitHub.
func (m *Main) runIssue(ctx context.Context, st *store.Store, ss *surfaceSet, runID string) (int, error) {
	run, err := st.Run(ctx, runID)
	if err != nil || !slices.Contains(run.Surfaces, "github") {
		return 0, err
	}
	sp, _ := m.specOf(run)
	sfs, err := ss.surfacesFor(run, sp)
	if err != nil {
		return 0, err
	}
	for _, sf := range sfs {
		if gs, ok := sf.(interface {
			RunIssue(ctx context.Context, runID string) (int, error)
		}); ok {
			return gs.RunIssue(ctx, runID)
		}
	}
	return 0, nil
}

// deliveryFor is the runner's Config.Delivery.
func (m *Main) deliveryFor(st *store.Store, ss *surfaceSet) func(run store.Run) (runner.Delivery, error) {
	return func(run store.Run) (runner.Delivery, error) {
		o, err := decodeRunOptions(run)
		if err != nil {
			return nil, err
		}
		sp, err := m.specOf(run)
		if err != nil && o.SpecPath != "" {
			return nil, err
		}
		opts, ok := m.deliveryOptions(sp, o)
		if !ok {
			return nil, nil
		}
		d, err := m.deliverer(st, ss)
		if err != nil {
			return nil, fmt.Errorf("delivery: %w", err)
		}
		return runDelivery{d: d, opts: opts}, nil
	}
}

// runDelivery is one run's delivery: the Deliverer with the run's options.
type runDelivery struct {
	d    *delivery.Deliverer
	opts delivery.Options
}

func (r runDelivery) Workdir(ctx context.Context, run store.Run) (string, error) {
	wd, err := r.d.Workdir(ctx, run, r.opts)
	if re := (*delivery.RemoteRepoError)(nil); errors.As(err, &re) {
		// A run started from an issue of re.Want with a spec whose workdir
		// is a checkout of another repository.
		return "", fmt.Errorf("%w; a run started from an issue of %s needs a spec whose workdir is a checkout of %s (triggers.github.repos: {repo: %s, spec: NAME})",
			err, re.Want, re.Want, re.Want)
	}
	return wd, err
}

func (r runDelivery) Deliver(ctx context.Context, run store.Run, failpoint func(string)) (string, error) {
	res, err := r.d.Deliver(ctx, run, r.opts, failpoint)
	if err != nil {
		return "", err
	}
	return res.Line(), nil
}

// DeliverWithout delivers leaving out the files Deliver held back
// (runner.Withholder).
func (r runDelivery) DeliverWithout(ctx context.Context, run store.Run, failpoint func(string)) (string, error) {
	res, err := r.d.DeliverWithout(ctx, run, r.opts, failpoint)
	if err != nil {
		return "", err
	}
	return res.Line(), nil
}

func (r runDelivery) Finish(ctx context.Context, run store.Run) error { return r.d.Finish(ctx, run) }

// Release gives the checkout its git configuration and hooks back when a
// drive of the run ends (runner.Releaser).
func (r runDelivery) Release(ctx context.Context, run store.Run) error { return r.d.Release(ctx, run) }

// Park hands a waiting run's work to the instance that resumes it
// (runner.Parker).
func (r runDelivery) Park(ctx context.Context, run store.Run) error {
	return r.d.Park(ctx, run, r.opts)
}

// Portable: Park pushes the run's branch only when the run's delivery
// pushes.
func (r runDelivery) Portable() bool { return r.opts.Push }

var (
	_ runner.Parker     = runDelivery{}
	_ runner.Withholder = runDelivery{}
	_ runner.Releaser   = runDelivery{}
)

// deliveryState is the process's Deliverer, built once (Main's fields).
type deliveryState struct {
	deliveryOnce sync.Once
	deliveryD    *delivery.Deliverer
	deliveryErr  error
	// deliveryRetry, when set (tests), replaces the delivery's waits: the
	// first wait between two tries of a push or a pull request, before a
	// pending delivery is tried again, and how often serve looks.
	deliveryRetry time.Duration
}

// timeoutTransport bounds each request sent (the client's own timeout
// spans the rate-limit waits of the transport above it).
type timeoutTransport struct {
	base    http.RoundTripper
	timeout time.Duration
}

func (t *timeoutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody ends a request's context once its body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// deliveryRetryEvery is how often serve looks for pending deliveries whose
// next attempt is due.
const deliveryRetryEvery = 15 * time.Second

// retryDeliveries tries again, while ctx lasts, the pending deliveries of
// done runs (a push or a pull request that had failed) whose next attempt
// is due: each backs off (delivery.Config.RetryAfter) between attempts.
// One held by another instance, or whose commit is on another instance,
// is left to it.
func (m *Main) retryDeliveries(ctx context.Context, st *store.Store, r *runner.Runner) {
	every := deliveryRetryEvery
	if m.deliveryRetry > 0 {
		every = m.deliveryRetry
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		due, err := st.PendingDeliveries(ctx, time.Now())
		if err != nil && ctx.Err() == nil {
			m.Logger.Warn("pending deliveries", "err", err)
		}
		for _, dl := range due {
			if ctx.Err() != nil {
				return
			}
			line, err := r.Redeliver(ctx, dl.RunID)
			switch {
			case err == nil:
				m.Logger.Info("delivery tried again", "run", dl.RunID, "delivery", line)
			case errors.Is(err, store.ErrLocked), errors.Is(err, store.ErrWorkElsewhere), errors.Is(err, runner.ErrNothingPending):
				m.Logger.Debug("pending delivery left", "run", dl.RunID, "err", err)
			default:
				m.Logger.Error("delivery failed", "run", dl.RunID, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
