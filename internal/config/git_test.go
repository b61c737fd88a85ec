package config

import (
	"os"
	"strings"
	"testing"
)

func TestGitSection(t *testing.T) {
	t.Parallel()
	good := "state_dir: /tmp/x\ngit:\n  enabled: true\n  base: main\n  push: true\n  pull_request:\n    enabled: true\n    reviewers: [octocat]\n  keep_worktrees: 24h\n"
	cfg, err := ParseEnv(strings.NewReader(good), "o.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !cfg.Git.Enabled || cfg.Git.Base != "main" || cfg.Git.Push == nil || !*cfg.Git.Push || !cfg.HasPullRequest() ||
		cfg.Git.KeepWorktrees.String() != "24h0m0s" || cfg.Git.MaxFileSize != DefaultMaxFileSize || cfg.Git.PullRequest.Reviewers[0] != "octocat" {
		t.Fatalf("git = %+v", cfg.Git)
	}
	if d := DefaultEnv(os.LookupEnv); d.Git.KeepWorktrees != DefaultKeepWorktrees || d.Git.Enabled || d.HasPullRequest() {
		t.Fatalf("default git = %+v", d.Git)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key", "git:\n  pull_request:\n    reviewer: [a]\n", "git.pull_request.reviewer"},
		{"bad repo", "git:\n  repo: acme\n", `git.repo: "acme" is not owner/name`},
		{"no push with a pull request", "git:\n  push: false\n  pull_request:\n    enabled: true\n", "git.push"},
		{"bad branch", "git:\n  branch: \"a b\"\n", "git.branch"},
		{"no file size", "git:\n  max_file_size: 0\n", "git.max_file_size: must be more than 0 bytes"},
		{"bad file size", "git:\n  max_file_size: huge\n", "git.max_file_size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseEnv(strings.NewReader("state_dir: /tmp/x\n"+tc.yaml), "o.yaml", func(string) (string, bool) { return "", false })
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
