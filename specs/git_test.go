package specs

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseGit(t *testing.T) {
	t.Parallel()
	no := false
	for _, tc := range []struct {
		name, front string
		want        *Git
	}{
		{"absent", "name: a\n", nil},
		{"empty mapping: delivery with the defaults", "git: {}\n", &Git{}},
		{"every key", "git:\n  base: main\n  branch: \"bot/{spec}/{date}\"\n  push: false\n  repo: acme/app\n", &Git{Base: "main", Branch: "bot/{spec}/{date}", Push: &no, Repo: "acme/app"}},
		{"pull request with nothing under it", "git:\n  pull_request:\n", &Git{PullRequest: &GitPullRequest{}}},
		{"pull request", "git:\n  pull_request:\n    draft: true\n    reviewers: [octocat, hubot]\n    labels: orchestrator\n",
			&Git{PullRequest: &GitPullRequest{Draft: true, Reviewers: []string{"octocat", "hubot"}, Labels: []string{"orchestrator"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := Parse("a.md", []byte("---\n"+tc.front+"---\nTask\n"))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(sp.Git, tc.want) {
				t.Fatalf("Git = %+v, want %+v", sp.Git, tc.want)
			}
		})
	}
}

func TestParseGitErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, front, want string }{
		{"not a mapping", "git: yes\n", "a.md:2: git: must be a mapping"},
		{"unknown key", "git:\n  bsae: main\n", "a.md:3: git.bsae: unknown key (known: base, branch, push, repo, pull_request)"},
		{"unknown pull request key", "git:\n  pull_request:\n    reviewer: [a]\n", "a.md:4: git.pull_request.reviewer: unknown key"},
		{"bad branch", "git:\n  branch: \"a..b\"\n", "a.md:3: git.branch: \"a..b\" is not a usable branch name"},
		{"bad repo", "git:\n  repo: acme\n", "a.md:3: git.repo: \"acme\" is not owner/name"},
		{"push not a bool", "git:\n  push: sometimes\n", "a.md:3: git.push: must be true or false"},
		{"a pull request without a push", "git:\n  push: false\n  pull_request: {}\n", "git: push: false cannot open a pull request"},
		{"duplicate key", "git:\n  base: a\n  base: b\n", "a.md:4: git.base: duplicate key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("a.md", []byte("---\n"+tc.front+"---\nTask\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
