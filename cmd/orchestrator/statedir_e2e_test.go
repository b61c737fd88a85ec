package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
)

// TestStateDirBesideTheRepositoryLeavesItClean: a first setup as a new user
// writes it, orchestrator.yaml in the repository with state_dir: ./state,
// and a run delivered through git. The run works (its worktree is outside
// the repository, in the user's state directory) and the repository's
// status stays clean: the state directory ignores itself.
func TestStateDirBesideTheRepositoryLeavesItClean(t *testing.T) {
	clitest.Claude(t)
	t.Parallel()
	e := newE2E(t,
		fakeapi.Rule{When: "make a change", Reply: fakeapi.Reply{Text: "Changing.", ToolUse: &fakeapi.ToolUse{
			Name: "Bash", Input: map[string]any{"command": "echo x > change.txt", "description": "change"}}}, Times: 1},
		fakeapi.Rule{Reply: fakeapi.Reply{Text: "Done."}},
	)
	repo := filepath.Join(e.dir, "repo")
	gitCmd(t, e.dir, "init", "--quiet", "--initial-branch=main", repo)
	os.WriteFile(filepath.Join(repo, "README.md"), []byte("app\n"), 0o600)
	gitCmd(t, repo, "add", ".")
	gitCmd(t, repo, "commit", "--quiet", "-m", "first")
	cfg := strings.Replace(e.base, fmt.Sprintf("state_dir: %q\n", e.state), "state_dir: ./state\n", 1)
	if cfg == e.base {
		t.Fatal("the test's config has no state_dir line to replace")
	}
	cfg = strings.Replace(cfg, "  timeout: 2m\n", "  timeout: 2m\n  allowed_tools: [Bash]\n", 1)
	cfg += "git:\n  enabled: true\n  push: false\n"
	config := filepath.Join(repo, "orchestrator.yaml")
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// Committed by the person, as a setup would be.
	gitCmd(t, repo, "add", "orchestrator.yaml")
	gitCmd(t, repo, "commit", "--quiet", "-m", "orchestrator")
	userState := t.TempDir()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Dir: repo,
		LookupEnv: func(k string) (string, bool) {
			if k == "XDG_STATE_HOME" {
				return userState, true
			}
			return "", false
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if code := m.Exec(ctx, []string{"run", "--prompt", "make a change"}); code != 0 {
		t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if st := gitCmd(t, repo, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Errorf("the repository is not clean after the run:\n%s", st)
	}
	if _, err := os.Stat(filepath.Join(repo, "state", "orchestrator.db")); err != nil {
		t.Errorf("the state is not where state_dir says: %v", err)
	}
	// The work is on the run's branch, made in a worktree outside the
	// repository.
	branches := gitCmd(t, repo, "branch", "--list", "orchestrator/*")
	if !strings.Contains(branches, "orchestrator/") {
		t.Fatalf("no run branch:\n%s", branches)
	}
	files := gitCmd(t, repo, "show", "--name-only", "--format=", strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(branches), "*")))
	if !strings.Contains(files, "change.txt") {
		t.Errorf("the run's commit lacks its change: %q", files)
	}
	for _, l := range strings.Split(gitCmd(t, repo, "worktree", "list", "--porcelain"), "\n") {
		if wt, ok := strings.CutPrefix(l, "worktree "); ok && wt != repo && strings.HasPrefix(wt, repo+string(filepath.Separator)) {
			t.Errorf("a worktree inside the repository: %s", wt)
		}
	}
}
