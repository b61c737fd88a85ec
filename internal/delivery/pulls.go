package delivery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	gh "github.com/google/go-github/v60/github"
)

// PullRequest is an opened (or found) pull request.
type PullRequest struct {
	Number int
	URL    string // its page
}

// PRRequest is what a pull request should say.
type PRRequest struct {
	Repo      string // owner/name
	Head      string // the branch
	Base      string
	Title     string
	Body      string
	Draft     bool
	Reviewers []string
	Labels    []string
}

// PullRequests opens and updates pull requests and comments on issues.
type PullRequests interface {
	// Open opens a pull request for req.Head, or, when one is already open
	// for that branch, updates its title and body instead: calling it again
	// never makes a second one. Reviewers and labels are added either way.
	Open(ctx context.Context, req PRRequest) (PullRequest, error)
	// Comment posts a comment on an issue of repo.
	Comment(ctx context.Context, repo string, issue int, body string) error
	// IssueURL returns the page of an issue of repo.
	IssueURL(ctx context.Context, repo string, issue int) (string, error)
}

// GitHubConfig configures GitHub's pull requests.
type GitHubConfig struct {
	BaseURL    string // the API; empty: api.github.com
	Token      string
	HTTPClient *http.Client
}

// GitHub opens pull requests through GitHub's REST API.
type GitHub struct{ api *gh.Client }

// NewGitHub returns GitHub's pull requests.
func NewGitHub(c GitHubConfig) (*GitHub, error) {
	hc := c.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	api := gh.NewClient(hc)
	if c.Token != "" {
		api = api.WithAuthToken(c.Token)
	}
	if c.BaseURL != "" {
		base := c.BaseURL
		if !strings.HasSuffix(base, "/") {
			base += "/"
		}
		u, err := url.Parse(base)
		if err != nil {
			return nil, fmt.Errorf("github base_url %q: %w", c.BaseURL, err)
		}
		api.BaseURL = u
	}
	return &GitHub{api: api}, nil
}

func splitRepo(repo string) (string, string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("repository %q: want owner/name", repo)
	}
	return owner, name, nil
}

// Open implements PullRequests. A create that failed may have created the
// pull request all the same (its response lost on the way, or an earlier
// attempt's): the open pull requests of the branch are looked at again
// before the error is returned, so that one found is updated, never
// duplicated.
func (g *GitHub) Open(ctx context.Context, req PRRequest) (PullRequest, error) {
	owner, name, err := splitRepo(req.Repo)
	if err != nil {
		return PullRequest{}, err
	}
	pr, err := g.find(ctx, owner, name, req)
	if err != nil {
		return PullRequest{}, err
	}
	if pr == nil {
		pr, _, err = g.api.PullRequests.Create(ctx, owner, name, &gh.NewPullRequest{
			Title: gh.String(req.Title), Head: gh.String(req.Head), Base: gh.String(req.Base),
			Body: gh.String(req.Body), Draft: gh.Bool(req.Draft)})
		if err != nil {
			cerr := fmt.Errorf("github: open a pull request in %s from %s into %s: %w", req.Repo, req.Head, req.Base, err)
			if ctx.Err() != nil {
				return PullRequest{}, cerr
			}
			found, ferr := g.find(ctx, owner, name, req)
			if ferr != nil || found == nil {
				return PullRequest{}, errors.Join(cerr, ferr)
			}
			// Created after all: said as the create meant it.
			pr = found
			if pr.GetTitle() != req.Title || pr.GetBody() != req.Body {
				if pr, _, err = g.edit(ctx, owner, name, pr.GetNumber(), req); err != nil {
					return PullRequest{}, err
				}
			}
		}
	} else if pr, _, err = g.edit(ctx, owner, name, pr.GetNumber(), req); err != nil {
		return PullRequest{}, err
	}
	out := PullRequest{Number: pr.GetNumber(), URL: pr.GetHTMLURL()}
	var errs []error
	if len(req.Reviewers) > 0 {
		if _, _, err := g.api.PullRequests.RequestReviewers(ctx, owner, name, out.Number, gh.ReviewersRequest{Reviewers: req.Reviewers}); err != nil {
			errs = append(errs, fmt.Errorf("github: request reviewers %v on #%d: %w", req.Reviewers, out.Number, err))
		}
	}
	if len(req.Labels) > 0 {
		if _, _, err := g.api.Issues.AddLabelsToIssue(ctx, owner, name, out.Number, req.Labels); err != nil {
			errs = append(errs, fmt.Errorf("github: label #%d %v: %w", out.Number, req.Labels, err))
		}
	}
	return out, errors.Join(errs...)
}

// find returns the open pull request of req.Head, or nil.
func (g *GitHub) find(ctx context.Context, owner, name string, req PRRequest) (*gh.PullRequest, error) {
	open, _, err := g.api.PullRequests.List(ctx, owner, name, &gh.PullRequestListOptions{
		State: "open", Head: owner + ":" + req.Head, ListOptions: gh.ListOptions{PerPage: 10}})
	if err != nil {
		return nil, fmt.Errorf("github: list the pull requests of %s for branch %s: %w", req.Repo, req.Head, err)
	}
	for _, p := range open {
		if p.GetHead().GetRef() == req.Head {
			return p, nil
		}
	}
	return nil, nil
}

// edit updates the title and body of pull request n.
func (g *GitHub) edit(ctx context.Context, owner, name string, n int, req PRRequest) (*gh.PullRequest, *gh.Response, error) {
	pr, resp, err := g.api.PullRequests.Edit(ctx, owner, name, n, &gh.PullRequest{Title: gh.String(req.Title), Body: gh.String(req.Body)})
	if err != nil {
		return nil, resp, fmt.Errorf("github: update pull request #%d of %s: %w", n, req.Repo, err)
	}
	return pr, resp, nil
}

// Transient reports whether err, from a GitHub call or a push, may pass if
// the same is tried again later: a network error, a timeout, a 5xx, a rate
// limit. A refusal (a 4xx other than a limit: credentials, permissions, a
// repository that does not exist, a request GitHub does not accept) is not.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, ErrPushFailed) {
		return true
	}
	if errors.Is(err, ErrPushRejected) || errors.Is(err, ErrGitMissing) || errors.Is(err, ErrNotRepository) {
		return false
	}
	var rl *gh.RateLimitError
	var abuse *gh.AbuseRateLimitError
	if errors.As(err, &rl) || errors.As(err, &abuse) {
		return true
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		switch c := er.Response.StatusCode; {
		case c >= 500, c == http.StatusTooManyRequests, c == http.StatusRequestTimeout:
			return true
		case c == http.StatusForbidden:
			return strings.Contains(strings.ToLower(er.Message), "rate limit")
		default:
			return false
		}
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, context.DeadlineExceeded)
}

// Comment implements PullRequests.
func (g *GitHub) Comment(ctx context.Context, repo string, issue int, body string) error {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return err
	}
	if _, _, err := g.api.Issues.CreateComment(ctx, owner, name, issue, &gh.IssueComment{Body: gh.String(body)}); err != nil {
		return fmt.Errorf("github: comment on %s#%d: %w", repo, issue, err)
	}
	return nil
}

// IssueURL implements PullRequests.
func (g *GitHub) IssueURL(ctx context.Context, repo string, issue int) (string, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return "", err
	}
	is, _, err := g.api.Issues.Get(ctx, owner, name, issue)
	if err != nil {
		return "", fmt.Errorf("github: issue %s#%d: %w", repo, issue, err)
	}
	return is.GetHTMLURL(), nil
}
