package delivery

import (
	"context"
	"errors"
	"fmt"
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

// Open implements PullRequests.
func (g *GitHub) Open(ctx context.Context, req PRRequest) (PullRequest, error) {
	owner, name, err := splitRepo(req.Repo)
	if err != nil {
		return PullRequest{}, err
	}
	open, _, err := g.api.PullRequests.List(ctx, owner, name, &gh.PullRequestListOptions{
		State: "open", Head: owner + ":" + req.Head, ListOptions: gh.ListOptions{PerPage: 10}})
	if err != nil {
		return PullRequest{}, fmt.Errorf("github: list the pull requests of %s for branch %s: %w", req.Repo, req.Head, err)
	}
	var pr *gh.PullRequest
	for _, p := range open {
		if p.GetHead().GetRef() == req.Head {
			pr = p
			break
		}
	}
	if pr != nil {
		pr, _, err = g.api.PullRequests.Edit(ctx, owner, name, pr.GetNumber(), &gh.PullRequest{Title: gh.String(req.Title), Body: gh.String(req.Body)})
		if err != nil {
			return PullRequest{}, fmt.Errorf("github: update pull request #%d of %s: %w", pr.GetNumber(), req.Repo, err)
		}
	} else {
		pr, _, err = g.api.PullRequests.Create(ctx, owner, name, &gh.NewPullRequest{
			Title: gh.String(req.Title), Head: gh.String(req.Head), Base: gh.String(req.Base),
			Body: gh.String(req.Body), Draft: gh.Bool(req.Draft)})
		if err != nil {
			return PullRequest{}, fmt.Errorf("github: open a pull request in %s from %s into %s: %w", req.Repo, req.Head, req.Base, err)
		}
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
