package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
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
//
// Every git command the orchestrator runs itself is run the same guarded
// way (run): the worktree it works in is written by the agent, so nothing
// there may decide what our commands execute or where they send the
// token. The command gets a scrubbed environment (the variables git needs,
// none of the orchestrator's own: no token but the one a fetch or push
// needs, handed to our askpass helper only), no system or global
// configuration, a HOME of its own, and protected settings given at the
// command line's level (GIT_CONFIG_COUNT), which the repository's
// configuration cannot override: no hooks, no fsmonitor, no credential
// helper, no askpass or ssh command of the repository's, no signing
// program, no editor or pager.
type Git struct {
	// Bin is the git binary (default "git", looked up on PATH).
	Bin string
	// Home is the HOME git runs with, a directory of the orchestrator's
	// own (default: os.DevNull, where nothing can be read).
	Home string
	// SSH is the ssh command of SSH remotes (core.sshCommand; default
	// "ssh"), unless the orchestrator's environment has GIT_SSH_COMMAND.
	SSH string
}

// protectedConfig is given to every git command at the command line's
// level, above every configuration file git reads: the repository's
// configuration (which the agent can write) cannot change it.
var protectedConfig = [][2]string{
	// No hook runs, whatever core.hooksPath or .git/hooks say: nothing
	// can be made a hook in the null device.
	{"core.hooksPath", os.DevNull},
	{"core.fsmonitor", "false"},
	// No attributes or ignore file outside the repository (the default
	// ones are under HOME).
	{"core.attributesFile", os.DevNull},
	{"core.excludesFile", os.DevNull},
	{"core.sshCommand", "ssh"},
	// An empty askpass: only ours (GIT_ASKPASS, for the token) is asked.
	{"core.askPass", ""},
	{"core.editor", "true"},
	{"sequence.editor", "true"},
	{"core.pager", "cat"},
	// An empty helper empties the list: no credential helper runs (the
	// token reaches git through our askpass only).
	{"credential.helper", ""},
	{"protocol.ext.allow", "never"},
	{"commit.gpgSign", "false"},
	{"tag.gpgSign", "false"},
	{"push.gpgSign", "false"},
	{"submodule.recurse", "false"},
	{"fetch.recurseSubmodules", "false"},
	{"push.recurseSubmodules", "no"},
	{"gc.auto", "0"},
	{"maintenance.auto", "false"},
}

// passedEnv are the variables of the orchestrator's own environment every
// git command gets; netEnv are those only fetches and pushes get (how the
// network is reached).
var (
	passedEnv = []string{"PATH", "TMPDIR", "TZ", "SYSTEMROOT"}
	netEnv    = []string{"SSH_AUTH_SOCK", "GIT_SSH_COMMAND", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "SSL_CERT_FILE", "SSL_CERT_DIR",
		"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"}
)

// Env is the environment a git command runs with (before the command's
// own additions); net adds what fetches and pushes need.
func (g Git) Env(net bool) []string {
	home := g.Home
	if home == "" {
		home = os.DevNull
	}
	env := []string{
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull,
		// No prompt on a terminal, no pager, no editor; the locale is
		// fixed so errors can be recognised.
		"GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "GIT_EDITOR=true", "GIT_SEQUENCE_EDITOR=true",
		"LC_ALL=C", "LANGUAGE=C", "GIT_NO_REPLACE_OBJECTS=1",
	}
	pass := passedEnv
	if net {
		pass = append(append([]string(nil), passedEnv...), netEnv...)
	}
	for _, k := range pass {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(protectedConfig)))
	for i, kv := range protectedConfig {
		if kv[0] == "core.sshCommand" && g.SSH != "" {
			kv[1] = g.SSH
		}
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	return env
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
	return redactURLs(fmt.Sprintf("git %s: %s", strings.Join(e.args, " "), msg), e.args)
}

// redactURLs replaces, in s, each of args that is a URL with credentials
// (a remote's recorded URL) by the URL without them.
func redactURLs(s string, args []string) string {
	for _, a := range args {
		if u, err := url.Parse(a); err == nil && u.User != nil {
			s = strings.ReplaceAll(s, a, u.Redacted())
			if p, ok := u.User.Password(); ok && p != "" {
				s = strings.ReplaceAll(s, p, "xxxxx")
			}
		}
	}
	return s
}

func (e *gitError) Unwrap() error { return e.err }

// run runs git in dir with args, extra environment and stdin, returning its
// standard output without the trailing newline. It reaches no network
// (see runNet).
func (g Git) run(ctx context.Context, dir string, env []string, stdin string, args ...string) (string, error) {
	return g.exec(ctx, dir, false, env, stdin, args)
}

// runNet runs a git command that reaches the remote (fetch, push,
// ls-remote): it also gets the variables that say how the network is
// reached.
func (g Git) runNet(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	return g.exec(ctx, dir, true, env, "", args)
}

func (g Git) exec(ctx context.Context, dir string, net bool, env []string, stdin string, args []string) (string, error) {
	bin, err := g.bin()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(g.Env(net), env...)
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

// resolve returns the commit a revision names; ok is false when it names none.
func (g Git) resolve(ctx context.Context, dir, rev string) (string, bool) {
	return g.resolveWith(ctx, dir, nil, rev)
}

// resolveWith is resolve with extra environment (wtEnv).
func (g Git) resolveWith(ctx context.Context, dir string, env []string, rev string) (string, bool) {
	sha, err := g.run(ctx, dir, env, "", "rev-parse", "--verify", "--quiet", rev+"^{commit}")
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
