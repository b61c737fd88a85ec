package specs

import (
	"strings"

	"github.com/orchestrator-dev/orchestrator/internal/config"
)

// Git is a spec's git section: its run's work is delivered as a branch, a
// commit, a push and a pull request (internal/delivery). A nil *Git in a
// Spec means the section is absent (the configuration's git section, or
// `run --git`, may still apply); "git:" with nothing under it delivers with
// the defaults.
//
//	git:
//	  base: main                           # default: the remote's default branch
//	  branch: "orchestrator/{spec}/{run}"  # {spec}, {run}, {date} are filled in
//	  push: true                           # default: true when pull_request is set
//	  repo: acme/app                       # default: surfaces.github.repo
//	  pull_request:                        # absent: no pull request
//	    draft: false
//	    reviewers: [octocat]
//	    labels: [orchestrator]
type Git struct {
	Base   string `yaml:"base"`
	Branch string `yaml:"branch"`
	// Push is nil when not set.
	Push *bool  `yaml:"push"`
	Repo string `yaml:"repo"`
	// PullRequest is nil when the key is absent, and a zero
	// GitPullRequest when it is set with nothing under it.
	PullRequest *GitPullRequest `yaml:"pull_request"`
}

// GitPullRequest is how a spec's pull request is opened.
type GitPullRequest struct {
	Draft     bool     `yaml:"draft"`
	Reviewers []string `yaml:"reviewers"`
	Labels    []string `yaml:"labels"`
}

// Check implements the check of a section (sectionChecker): what the
// keys' types do not check.
func (g *Git) Check(c *config.Checker) {
	for _, kv := range [][2]string{{"base", g.Base}, {"branch", g.Branch}, {"repo", g.Repo}} {
		if kv[1] != "" && strings.TrimSpace(kv[1]) == "" {
			c.Add(kv[0], "must not be empty")
		}
	}
	if g.Branch != "" && !validBranchTemplate(g.Branch) {
		c.Add("branch", "%q is not a usable branch name (no spaces, \"..\", \"~^:?*[\\\", and no leading \"-\" or \"/\")", g.Branch)
	}
	if o, nm, ok := strings.Cut(g.Repo, "/"); g.Repo != "" && (!ok || o == "" || nm == "" || strings.Contains(nm, "/")) {
		c.Add("repo", "%q is not owner/name", g.Repo)
	}
	if pr := g.PullRequest; pr != nil {
		c.NonEmptyItems("pull_request.reviewers", pr.Reviewers)
		c.NonEmptyItems("pull_request.labels", pr.Labels)
		if g.Push != nil && !*g.Push {
			c.Add("", "push: false cannot open a pull request: a pull request needs the branch on the remote")
		}
	}
}

// validBranchTemplate rejects what git never accepts in a branch name
// (git check-ref-format has the last word when the run starts).
func validBranchTemplate(b string) bool {
	if strings.HasPrefix(b, "-") || strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".lock") ||
		strings.Contains(b, "..") || strings.Contains(b, "//") || strings.Contains(b, "@{") {
		return false
	}
	for _, r := range b {
		if r <= ' ' || r == 0x7f || strings.ContainsRune("~^:?*[\\", r) {
			return false
		}
	}
	return true
}
