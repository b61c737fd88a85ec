package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Errors callers check with errors.Is.
var (
	// ErrGitMissing: the git binary is not installed (not on PATH).
	ErrGitMissing = errors.New("git is not installed (not found on PATH): delivering a run through git needs it")
	// ErrNotRepository: the run's workdir is not inside a git repository.
	ErrNotRepository = errors.New("not a git repository")
	// ErrPushRejected: the remote refused the branch (not a fast-forward,
	// a hook, or the credentials).
	ErrPushRejected = errors.New("push rejected")
)

// Git runs the git binary. The zero value runs "git" from PATH.
type Git struct {
	// Bin is the git binary (default "git", looked up on PATH).
	Bin string
}

func (g Git) bin() (string, error) {
	b := g.Bin
	if b == "" {
		b = "git"
	}
	p, err := exec.LookPath(b)
	if err != nil {
		return "", ErrGitMissing
	}
	return p, nil
}

// gitError is a failed git command: its arguments (never a secret: tokens
// reach git through the environment only) and what it printed.
type gitError struct {
	args   []string
	stdout string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = e.err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.args, " "), msg)
}

func (e *gitError) Unwrap() error { return e.err }

// run runs git in dir with args, extra environment and stdin, returning its
// standard output without the trailing newline.
func (g Git) run(ctx context.Context, dir string, env []string, stdin string, args ...string) (string, error) {
	bin, err := g.bin()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	// No prompt on a terminal, no pager, no editor, whatever the person's
	// configuration says; the locale is fixed so errors can be recognised.
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "GIT_EDITOR=true", "LC_ALL=C", "LANGUAGE=C")
	cmd.Env = append(cmd.Env, env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", &gitError{args: args, stdout: out.String(), stderr: errb.String(), err: err}
	}
	return strings.TrimRight(out.String(), "\n"), nil
}

// toplevel returns the root of the repository dir is in.
func (g Git) toplevel(ctx context.Context, dir string) (string, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("workdir %s: %w: it is not a directory", dir, ErrNotRepository)
	}
	top, err := g.run(ctx, dir, nil, "", "rev-parse", "--show-toplevel")
	if errors.Is(err, ErrGitMissing) {
		return "", err
	}
	if err != nil || top == "" {
		return "", fmt.Errorf("workdir %s: %w (delivery needs a checkout with a commit to start from: git init, or point workdir at one)", dir, ErrNotRepository)
	}
	return filepath.Clean(top), nil
}

// hasRemote reports whether the repository has the named remote.
func (g Git) hasRemote(ctx context.Context, dir, remote string) bool {
	_, err := g.run(ctx, dir, nil, "", "remote", "get-url", remote)
	return err == nil
}

// resolve returns the commit a revision names; ok is false when it names none.
func (g Git) resolve(ctx context.Context, dir, rev string) (string, bool) {
	sha, err := g.run(ctx, dir, nil, "", "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil || sha == "" {
		return "", false
	}
	return sha, true
}

// isWorktree reports whether dir is the top of a git worktree.
func (g Git) isWorktree(ctx context.Context, dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		return false
	}
	top, err := g.run(ctx, dir, nil, "", "rev-parse", "--show-toplevel")
	if err != nil {
		return false
	}
	a, _ := filepath.EvalSymlinks(top)
	b, _ := filepath.EvalSymlinks(dir)
	return a == b
}

// contains reports whether commit is in the history of rev.
func (g Git) contains(ctx context.Context, dir, rev, commit string) bool {
	_, err := g.run(ctx, dir, nil, "", "merge-base", "--is-ancestor", commit, rev)
	return err == nil
}
