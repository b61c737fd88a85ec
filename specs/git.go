package specs

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Git is a spec's git section: its run's work is delivered as a branch, a
// commit, a push and a pull request (internal/delivery). A nil *Git in a
// Spec means the section is absent (the configuration's git section, or
// `run --git`, may still apply).
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
	Base   string
	Branch string
	// Push is nil when not set.
	Push *bool
	Repo string
	// PullRequest is nil when the key is absent.
	PullRequest *GitPullRequest
}

// GitPullRequest is how a spec's pull request is opened.
type GitPullRequest struct {
	Draft     bool
	Reviewers []string
	Labels    []string
}

// gitProblem is a problem in a git section, at a line of the frontmatter.
type gitProblem struct {
	line     int
	key, msg string
}

var (
	gitKeys = []string{"base", "branch", "push", "repo", "pull_request"}
	prKeys  = []string{"draft", "reviewers", "labels"}
)

// parseGit reads a git section. It depends on nothing but yaml.v3, so it
// works whatever decoder walks the rest of the frontmatter.
func parseGit(n *yaml.Node, key string) (*Git, []gitProblem) {
	var probs []gitProblem
	add := func(n *yaml.Node, key, format string, args ...any) {
		probs = append(probs, gitProblem{n.Line, key, fmt.Sprintf(format, args...)})
	}
	n = resolve(n)
	if isNull(n) {
		return &Git{}, nil
	}
	if n.Kind != yaml.MappingNode {
		add(n, key, "must be a mapping (base, branch, push, repo, pull_request), not %s", kindName(n))
		return nil, probs
	}
	str := func(v *yaml.Node, key string) string {
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" || strings.TrimSpace(v.Value) == "" {
			add(v, key, "must be a non-empty string")
			return ""
		}
		return strings.TrimSpace(v.Value)
	}
	boolean := func(v *yaml.Node, key string) (bool, bool) {
		var b bool
		if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&b) != nil {
			add(v, key, "must be true or false, not %q", v.Value)
			return false, false
		}
		return b, true
	}
	list := func(v *yaml.Node, key string) []string {
		if v.Kind == yaml.ScalarNode {
			if s := str(v, key); s != "" {
				return []string{s}
			}
			return nil
		}
		if v.Kind != yaml.SequenceNode {
			add(v, key, "must be a list of strings, not %s", kindName(v))
			return nil
		}
		var out []string
		for i, it := range v.Content {
			if s := str(resolve(it), fmt.Sprintf("%s[%d]", key, i)); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	pairs := func(m *yaml.Node, path string, known []string) [][2]*yaml.Node {
		var out [][2]*yaml.Node
		seen := map[string]bool{}
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := resolve(m.Content[i]), resolve(m.Content[i+1])
			kk := join(path, k.Value)
			switch {
			case k.Kind != yaml.ScalarNode:
				add(k, path, "a key must be a string, not %s", kindName(k))
			case seen[k.Value]:
				add(k, kk, "duplicate key")
			case !slices.Contains(known, k.Value):
				add(k, kk, "unknown key (known: %s)", strings.Join(known, ", "))
			default:
				seen[k.Value] = true
				out = append(out, [2]*yaml.Node{k, v})
			}
		}
		return out
	}
	g := &Git{}
	for _, kv := range pairs(n, key, gitKeys) {
		k, v := kv[0].Value, kv[1]
		kk := join(key, k)
		if isNull(v) && k != "pull_request" {
			continue
		}
		switch k {
		case "base":
			g.Base = str(v, kk)
		case "branch":
			g.Branch = str(v, kk)
			if g.Branch != "" && !validBranchTemplate(g.Branch) {
				add(v, kk, "%q is not a usable branch name (no spaces, \"..\", \"~^:?*[\\\", and no leading \"-\" or \"/\")", g.Branch)
				g.Branch = ""
			}
		case "push":
			if b, ok := boolean(v, kk); ok {
				g.Push = &b
			}
		case "repo":
			g.Repo = str(v, kk)
			if o, nm, ok := strings.Cut(g.Repo, "/"); g.Repo != "" && (!ok || o == "" || nm == "" || strings.Contains(nm, "/")) {
				add(v, kk, "%q is not owner/name", g.Repo)
				g.Repo = ""
			}
		case "pull_request":
			pr := &GitPullRequest{}
			g.PullRequest = pr
			if isNull(v) {
				continue
			}
			if v.Kind != yaml.MappingNode {
				add(v, kk, "must be a mapping (draft, reviewers, labels), not %s", kindName(v))
				continue
			}
			for _, kv2 := range pairs(v, kk, prKeys) {
				k2, v2 := kv2[0].Value, kv2[1]
				if isNull(v2) {
					continue
				}
				switch k2 {
				case "draft":
					pr.Draft, _ = boolean(v2, join(kk, k2))
				case "reviewers":
					pr.Reviewers = list(v2, join(kk, k2))
				case "labels":
					pr.Labels = list(v2, join(kk, k2))
				}
			}
		}
	}
	if g.PullRequest != nil && g.Push != nil && !*g.Push {
		add(n, key, "push: false cannot open a pull request: a pull request needs the branch on the remote")
	}
	return g, probs
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
