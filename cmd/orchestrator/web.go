package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/daemon"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/internal/web"
	"github.com/orchestrator-dev/orchestrator/internal/web/webstore"
)

func (m *Main) newWebCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "web",
		Short: "The web inbox that serve serves (serve.web)",
		Args:  cobra.NoArgs,
	}
	token := &cobra.Command{
		Use:   "token NAME",
		Short: "Print a new sign-in token for NAME and the line to add to serve.web.users",
		Long: `token prints a new random token for the person NAME, and the entry to add
under serve.web.users in the configuration: only the token's SHA-256 is kept
there. Give the token to NAME (it is shown once, and nowhere else); they sign
in with it on the web inbox, or send it as "Authorization: Bearer TOKEN" to
the JSON API.`,
		Args:        cobra.ExactArgs(1),
		Annotations: skipConfigAnnotation(),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := strings.TrimSpace(args[0])
			if name == "" || strings.ContainsAny(name, "\r\n\t\"\\") {
				return usageError(fmt.Errorf("NAME %q: want a name on one line, without quotes or backslashes", args[0]))
			}
			tok, sum := web.NewToken()
			fmt.Fprintf(m.Stdout, "token for %s (give it to them; it is not stored):\n  %s\n\n", name, tok)
			fmt.Fprintf(m.Stdout, "add under serve.web.users:\n  - {name: %q, token_sha256: %s}\n", name, sum)
			return nil
		},
	}
	cmd.AddCommand(token)
	return cmd
}

// webResumer resumes interrupted runs for the web inbox, through the
// daemon (which waits for them on shutdown like for any run it drives).
type webResumer struct {
	st *store.Store
	// ctx is serve's: a resumed run lives as long as serve.
	ctx context.Context
	d   *daemon.Daemon
}

func (r *webResumer) Resume(ctx context.Context, runID, by string) error {
	run, err := r.st.Run(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %w", web.ErrNotFound, err)
	}
	if err != nil {
		return err
	}
	if run.Status != store.RunInterrupted || r.d == nil {
		return fmt.Errorf("run %s is %s: %w", run.ID, run.Status, web.ErrNotResumable)
	}
	if err := r.d.Resume(r.ctx, run.ID, run.Spec); err != nil {
		if errors.Is(err, daemon.ErrDriving) || errors.Is(err, daemon.ErrNotServing) {
			return fmt.Errorf("run %s: %w: %w", run.ID, web.ErrNotResumable, err)
		}
		return err
	}
	return nil
}

// mountWeb adds the web inbox to serve's handlers when serve.web.enabled.
// The returned resumer is given the daemon once it exists.
func (m *Main) mountWeb(ctx context.Context, st *store.Store, ss *surfaceSet) (*webResumer, error) {
	res := &webResumer{st: st, ctx: ctx}
	wc := m.Config.Serve.Web
	if !wc.Enabled {
		return res, nil
	}
	cfg := web.Config{
		Backend: &webstore.Backend{Store: st, IssueURL: func(ctx context.Context, runID string) (string, error) {
			return m.runIssueURL(ctx, st, ss, runID)
		}},
		Allow:             wc.Allow,
		ProxyHeader:       strings.TrimSpace(wc.ProxyHeader),
		ProxySecretHeader: strings.TrimSpace(wc.ProxySecretHeader),
		ProxySecret:       wc.ProxySecret,
		AnswerMaxBytes:    m.Config.Run.AnswerMaxBytes.Int(),
		Done:              ctx.Done(),
		Resume:            res,
		Start:             &webStarter{m: m, st: st},
		ProxyRole:         web.Role(wc.ProxyRole),
		Logger:            m.Logger,
	}
	cfg.Schedules = webSchedules{m: m, st: st} // schedule.go
	for _, u := range wc.Users {
		cfg.Users = append(cfg.Users, web.User{Name: u.Name, TokenSHA256: u.TokenSHA256, Role: web.Role(u.Role)})
	}
	for _, p := range wc.TrustedProxies {
		pfx, err := config.ParseWebProxy(p)
		if err != nil {
			return nil, configError(fmt.Errorf("serve.web.trusted_proxies: %w", err))
		}
		cfg.TrustedProxies = append(cfg.TrustedProxies, pfx)
	}
	srv, err := web.New(cfg)
	if err != nil {
		return nil, configError(err)
	}
	m.handlers["/"] = srv.Handler()
	return res, nil
}

// runIssueURL is the address of the GitHub issue a run's questions are
// asked in, "" when it asks on no GitHub issue.
func (m *Main) runIssueURL(ctx context.Context, st *store.Store, ss *surfaceSet, runID string) (string, error) {
	run, err := st.Run(ctx, runID)
	if err != nil || !slices.Contains(run.Surfaces, "github") {
		return "", err
	}
	sp, _ := m.specOf(run)
	sfs, err := ss.surfacesFor(run, sp)
	if err != nil {
		return "", err
	}
	for _, sf := range sfs {
		gs, ok := sf.(interface {
			RunIssue(ctx context.Context, runID string) (int, error)
			Repo() string
		})
		if !ok {
			continue
		}
		n, err := gs.RunIssue(ctx, runID)
		if err != nil || n == 0 {
			return "", err
		}
		return fmt.Sprintf("%s/%s/issues/%d", githubWebRoot(m.Config.Surfaces.GitHub.BaseURL), gs.Repo(), n), nil
	}
	return "", nil
}

// githubWebRoot is the web address of the GitHub whose REST API root is
// apiBase: https://github.com for https://api.github.com/ (the default), and
// https://HOST for GitHub Enterprise Server's https://HOST/api/v3/.
func githubWebRoot(apiBase string) string {
	u, err := url.Parse(apiBase)
	if apiBase == "" || err != nil || u.Host == "api.github.com" {
		return "https://github.com"
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/api/v3")
	u.RawQuery, u.Fragment = "", ""
	return strings.TrimSuffix(u.String(), "/")
}
