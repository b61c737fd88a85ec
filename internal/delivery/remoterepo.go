package delivery

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// RemoteRepoError says that a run's checkout is not a checkout of the
// repository the run delivers to (Options.RemoteRepo): its remote names
// another repository, or none.
type RemoteRepoError struct {
	Checkout string // the checkout's top directory
	Remote   string // the remote's name ("origin")
	Want     string // owner/name
	Got      string // owner/name the remote's URL names; "" when it has no URL
}

func (e *RemoteRepoError) Error() string {
	if e.Got == "" {
		return fmt.Sprintf("the checkout %s has no remote %q, so the run's work cannot go to %s", e.Checkout, e.Remote, e.Want)
	}
	return fmt.Sprintf("the checkout %s is a checkout of %s (its remote %q), not of %s, where the run's work goes: nothing was pushed", e.Checkout, e.Got, e.Remote, e.Want)
}

// RepoOfURL returns the "owner/name" a git remote URL names: the last two
// parts of its path, without ".git" (https://github.com/acme/api.git,
// git@github.com:acme/api.git, ssh://git@host/acme/api, a path
// …/acme/api.git). ok is false when the path has fewer than two parts.
// The URL's user and password (a token) are never part of the result.
func RepoOfURL(raw string) (repo string, ok bool) {
	p := strings.TrimSpace(raw)
	switch {
	case strings.Contains(p, "://"):
		u, err := url.Parse(p)
		if err != nil {
			return "", false
		}
		p = u.Path
	default:
		// scp-like [user@]host:path, when the colon comes before any slash.
		if i := strings.Index(p, ":"); i > 0 && !strings.Contains(p[:i], "/") && !(i == 1 && len(p) > 2 && (p[2] == '\\' || p[2] == '/')) {
			p = p[i+1:]
		}
	}
	p = strings.ReplaceAll(p, `\`, "/")
	var parts []string
	for _, s := range strings.Split(p, "/") {
		if s != "" && s != "." {
			parts = append(parts, s)
		}
	}
	if len(parts) > 0 {
		parts[len(parts)-1] = strings.TrimSuffix(parts[len(parts)-1], ".git")
	}
	if len(parts) < 2 || parts[len(parts)-1] == "" {
		return "", false
	}
	return parts[len(parts)-2] + "/" + parts[len(parts)-1], true
}

// checkRemoteRepo fails when the remote's fetch or push URL (read from
// the checkout top before the agent ran) does not name want.
func checkRemoteRepo(top, remote, want, fetchURL, pushURL string) error {
	if fetchURL == "" {
		return &RemoteRepoError{Checkout: top, Remote: remote, Want: want}
	}
	for _, u := range []string{fetchURL, pushURL} {
		if u == "" {
			continue
		}
		got, ok := RepoOfURL(u)
		if !ok {
			got = "an unknown repository"
		}
		if !strings.EqualFold(got, want) {
			return &RemoteRepoError{Checkout: top, Remote: remote, Want: want, Got: got}
		}
	}
	return nil
}

// CheckRemoteRepo checks, before a run is made, that dir is in a checkout
// whose remote (o.Remote, default origin) is o.RemoteRepo: nil when it is,
// or when o has no RemoteRepo; a *RemoteRepoError when it is not; another
// error when dir is no checkout. Workdir checks again when the run starts.
func (g Git) CheckRemoteRepo(ctx context.Context, dir string, o Options) error {
	o = o.withDefaults()
	if o.RemoteRepo == "" {
		return nil
	}
	top, err := g.toplevel(ctx, dir)
	if err != nil {
		return err
	}
	fetch, push := g.remoteURLs(ctx, top, o.Remote)
	return checkRemoteRepo(top, o.Remote, o.RemoteRepo, fetch, push)
}
