package delivery

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

// gitCall is one git command the Deliverer ran, as a wrapper saw it.
type gitCall struct {
	args []string
	env  map[string]string
}

// wrappedGit returns a git binary that records each command's arguments
// and environment in a directory, then runs git, and a function that reads
// the commands recorded so far.
func wrappedGit(t *testing.T) (string, func() []gitCall) {
	t.Helper()
	real := clitest.Git(t)
	dir := t.TempDir()
	logs := filepath.Join(dir, "calls")
	if err := os.Mkdir(logs, 0o700); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "git")
	script := "#!/bin/sh\nf=$(mktemp '" + logs + "/call.XXXXXX')\nprintf '%s\\0' \"$@\" > \"$f.args\"\nenv -0 > \"$f.env\"\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return bin, func() []gitCall {
		var out []gitCall
		ents, _ := filepath.Glob(filepath.Join(logs, "call.*.args"))
		for _, a := range ents {
			args, _ := os.ReadFile(a)
			envb, _ := os.ReadFile(strings.TrimSuffix(a, ".args") + ".env")
			c := gitCall{args: strings.Split(strings.TrimSuffix(string(args), "\x00"), "\x00"), env: map[string]string{}}
			for _, kv := range strings.Split(string(envb), "\x00") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					c.env[k] = v
				}
			}
			out = append(out, c)
		}
		return out
	}
}

// subcommand is the git command's name (after its global options).
func (c gitCall) subcommand() string {
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		if a == "-c" || a == "-C" {
			i++
			continue
		}
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

func (c gitCall) config(key string) (string, bool) {
	for k, v := range c.env {
		if n, ok := strings.CutPrefix(k, "GIT_CONFIG_KEY_"); ok && strings.EqualFold(v, key) {
			val, ok := c.env["GIT_CONFIG_VALUE_"+n]
			return val, ok
		}
	}
	return "", false
}

// TestGitCommandsRunScrubbed: every git command of a delivery (fetch,
// worktree, commit, push) runs with no variable of the orchestrator's
// environment but those git needs, no global or system configuration, a
// HOME of its own, no hooks and no credential helper; the token is in the
// environment of the fetches and pushes only, which run in the run's own
// remote repository and name the recorded URL.
func TestGitCommandsRunScrubbed(t *testing.T) {
	origin, checkout := repos(t)
	const token = "tok-scrub-4711"
	url := gitHTTP(t, filepath.Dir(origin), token) + "/origin.git"
	git(t, checkout, "remote", "set-url", "origin", url)
	t.Setenv("ORCHESTRATOR_TEST_CANARY", "canary-value")
	t.Setenv("GH_TOKEN", "gh-canary")
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.hookspath'='/tmp'")
	bin, calls := wrappedGit(t)

	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	gh := githubtest.NewServer(t)
	prs, err := NewGitHub(GitHubConfig{BaseURL: gh.URL() + "/", HTTPClient: gh.Client()})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Store: st, PRs: prs, Token: token, Git: Git{Bin: bin}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, d: d, gh: gh}
	ctx := context.Background()
	run := f.newRun(t, "r0000s01", checkout)
	wd, err := d.Workdir(ctx, run, prOpts)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wd, "new.txt"), []byte("x\n"), 0o600)
	if _, err := d.Deliver(ctx, run, prOpts, nil); err != nil {
		t.Fatal(err)
	}
	if got := git(t, origin, "show", BranchName(DefaultBranch, run)+":new.txt"); got != "x" {
		t.Fatalf("origin's branch has new.txt = %q", got)
	}

	home, _ := os.UserHomeDir()
	seen := map[string]bool{}
	for _, c := range calls() {
		sub := c.subcommand()
		seen[sub] = true
		for k, v := range c.env {
			if v == "canary-value" || v == "gh-canary" || k == "GH_TOKEN" || k == "GIT_CONFIG_PARAMETERS" {
				t.Errorf("git %s got %s from the orchestrator's environment", sub, k)
			}
			if strings.Contains(v, token) && (k != "ORCHESTRATOR_GIT_TOKEN" || (sub != "fetch" && sub != "push" && sub != "ls-remote")) {
				t.Errorf("git %v: the token is in %s", c.args, k)
			}
		}
		if _, ok := c.env["ORCHESTRATOR_GIT_TOKEN"]; ok && !strings.HasPrefix(c.args[0], "--git-dir="+filepath.Join(st.Dir(), "worktrees", ".remotes")) {
			t.Errorf("git %v: the token outside the run's own remote repository", c.args)
		}
		if hp, ok := c.config("core.hooksPath"); !ok || hp != os.DevNull {
			t.Errorf("git %v: core.hooksPath = %q, %v", c.args, hp, ok)
		}
		if ch, ok := c.config("credential.helper"); !ok || ch != "" {
			t.Errorf("git %v: credential.helper = %q, %v", c.args, ch, ok)
		}
		if fm, ok := c.config("core.fsmonitor"); !ok || fm != "false" {
			t.Errorf("git %v: core.fsmonitor = %q, %v", c.args, fm, ok)
		}
		if c.env["GIT_CONFIG_GLOBAL"] != os.DevNull || c.env["GIT_CONFIG_NOSYSTEM"] != "1" || c.env["HOME"] == home || c.env["GIT_TERMINAL_PROMPT"] != "0" {
			t.Errorf("git %v: GIT_CONFIG_GLOBAL=%q GIT_CONFIG_NOSYSTEM=%q HOME=%q GIT_TERMINAL_PROMPT=%q", c.args,
				c.env["GIT_CONFIG_GLOBAL"], c.env["GIT_CONFIG_NOSYSTEM"], c.env["HOME"], c.env["GIT_TERMINAL_PROMPT"])
		}
		if sub == "push" && !slicesContains(c.args, url) {
			t.Errorf("git %v: push names no recorded URL", c.args)
		}
		if sub == "commit" || sub == "add" || sub == "status" {
			if c.env["GIT_DIR"] == "" || c.env["GIT_WORK_TREE"] != wd {
				t.Errorf("git %v: GIT_DIR=%q GIT_WORK_TREE=%q, want the recorded ones", c.args, c.env["GIT_DIR"], c.env["GIT_WORK_TREE"])
			}
		}
	}
	for _, want := range []string{"fetch", "worktree", "commit", "push"} {
		if !seen[want] {
			t.Errorf("no git %s seen (saw %v)", want, seen)
		}
	}
}

// TestPushGoesToTheRecordedURL: the agent changes the push URL and adds
// an insteadOf after the worktree was added: the push goes to the URL
// recorded before, the checkout's config is as it was, and what the agent
// wrote is kept aside.
func TestPushGoesToTheRecordedURL(t *testing.T) {
	t.Parallel()
	origin, checkout := repos(t)
	other := filepath.Join(t.TempDir(), "other.git")
	git(t, checkout, "init", "--quiet", "--bare", other)
	f := newFixture(t, "")
	ctx := context.Background()
	run := f.newRun(t, "r0000s02", checkout)
	wd, err := f.d.Workdir(ctx, run, prOpts)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(checkout, ".git", "config"))
	git(t, wd, "remote", "set-url", "--push", "origin", other)
	git(t, wd, "config", "url."+other+".insteadOf", origin)
	git(t, wd, "config", "core.hooksPath", filepath.Join(wd, "hooks"))
	os.MkdirAll(filepath.Join(wd, "hooks"), 0o700)
	ran := filepath.Join(t.TempDir(), "ran")
	hook := "#!/bin/sh\nenv > '" + ran + "'\n"
	for _, h := range []string{"pre-commit", "post-commit", "pre-push"} {
		os.WriteFile(filepath.Join(wd, "hooks", h), []byte(hook), 0o700)
		os.WriteFile(filepath.Join(checkout, ".git", "hooks", h), []byte(hook), 0o700)
	}
	os.WriteFile(filepath.Join(wd, "new.txt"), []byte("x\n"), 0o600)
	res, err := f.d.Deliver(ctx, run, prOpts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, origin, "show", res.Delivery.Branch+":new.txt"); got != "x" {
		t.Fatalf("origin's branch has new.txt = %q", got)
	}
	if out := git(t, other, "for-each-ref"); out != "" {
		t.Fatalf("pushed to the agent's URL: %s", out)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("a hook ran")
	}
	if after, _ := os.ReadFile(filepath.Join(checkout, ".git", "config")); !bytes.Equal(before, after) {
		t.Fatalf("the checkout's config changed:\n%s\nwas:\n%s", after, before)
	}
	for _, h := range []string{"pre-commit", "post-commit", "pre-push"} {
		if _, err := os.Stat(filepath.Join(checkout, ".git", "hooks", h)); err == nil {
			t.Errorf("the checkout keeps the hook %s", h)
		}
	}
	kept, _ := filepath.Glob(filepath.Join(f.st.Dir(), "worktrees", run.ID+".rejected", "*", "*"))
	var names []string
	for _, k := range kept {
		names = append(names, filepath.Base(k))
	}
	if s := strings.Join(names, " "); !strings.Contains(s, "config") || !strings.Contains(s, "pre-push") {
		t.Errorf("kept aside: %v, want the changed config and the hooks", names)
	}
}

// TestSwappedRepositoryStopsTheDelivery: the worktree's .git file names
// another repository's worktree, or the worktree is on another branch:
// nothing is committed or pushed, and the error says what changed.
func TestSwappedRepositoryStopsTheDelivery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, wd, otherWT string)
		want   string
	}{
		{"dot git", func(t *testing.T, wd, otherWT string) {
			b, err := os.ReadFile(filepath.Join(otherWT, ".git"))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(wd, ".git"), b, 0o600)
		}, "its .git file"},
		{"branch", func(t *testing.T, wd, otherWT string) { git(t, wd, "checkout", "--quiet", "-b", "elsewhere") }, "not the run's branch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			origin, checkout := repos(t)
			otherOrigin, otherCheckout := repos(t)
			otherWT := filepath.Join(t.TempDir(), "wt")
			git(t, otherCheckout, "worktree", "add", "--quiet", "-b", "orchestrator/nightly-deps/r0000s03", otherWT)
			f := newFixture(t, "")
			ctx := context.Background()
			run := f.newRun(t, "r0000s03", checkout)
			wd, err := f.d.Workdir(ctx, run, prOpts)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(wd, "new.txt"), []byte("x\n"), 0o600)
			tc.change(t, wd, otherWT)
			_, err = f.d.Deliver(ctx, run, prOpts, nil)
			if !errors.Is(err, ErrWorktreeChanged) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %v naming %q", err, ErrWorktreeChanged, tc.want)
			}
			for _, repo := range []string{origin, otherOrigin} {
				if out := git(t, repo, "branch", "--list", "orchestrator/*"); out != "" {
					t.Errorf("pushed to %s: %s", repo, out)
				}
			}
			if out := git(t, otherCheckout, "log", "--oneline", "orchestrator/nightly-deps/r0000s03"); strings.Count(out, "\n") != 0 {
				t.Errorf("committed in the other repository:\n%s", out)
			}
			if len(f.gh.Pulls("acme/app")) != 0 {
				t.Error("a pull request was opened")
			}
		})
	}
}

// TestAnotherRunsChangesAreNotTakenForTheCheckouts: run A's agent writes a
// hook and changes the config; run B starts on the same checkout after
// that; A delivers, then B: the checkout ends as it was before A, and B's
// delivery does not bring A's changes back.
func TestAnotherRunsChangesAreNotTakenForTheCheckouts(t *testing.T) {
	t.Parallel()
	_, checkout := repos(t)
	f := newFixture(t, "")
	ctx := context.Background()
	opts := Options{}
	a := f.newRun(t, "r0000s0a", checkout)
	wa, err := f.d.Workdir(ctx, a, opts)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(checkout, ".git", "config"))
	git(t, wa, "config", "core.sshCommand", "touch pwned")
	hook := filepath.Join(checkout, ".git", "hooks", "post-checkout")
	os.WriteFile(hook, []byte("#!/bin/sh\ntrue\n"), 0o700)
	b := f.newRun(t, "r0000s0b", checkout)
	wb, err := f.d.Workdir(ctx, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []struct {
		run store.Run
		wd  string
	}{{a, wa}, {b, wb}} {
		os.WriteFile(filepath.Join(run.wd, "new.txt"), []byte(run.run.ID), 0o600)
		if _, err := f.d.Deliver(ctx, run.run, opts, nil); err != nil {
			t.Fatal(err)
		}
		if after, _ := os.ReadFile(filepath.Join(checkout, ".git", "config")); !bytes.Equal(before, after) {
			t.Fatalf("after %s's delivery the checkout's config is:\n%s\nwas:\n%s", run.run.ID, after, before)
		}
		if _, err := os.Stat(hook); err == nil {
			t.Fatalf("after %s's delivery the checkout keeps the hook", run.run.ID)
		}
	}
}

// TestIncludedConfigIsWatched: a file the checkout's config includes, and
// one it names that does not exist yet, are restored when the agent
// writes them.
func TestIncludedConfigIsWatched(t *testing.T) {
	t.Parallel()
	_, checkout := repos(t)
	shared := filepath.Join(t.TempDir(), "shared.gitconfig")
	os.WriteFile(shared, []byte("[user]\n\tname = Person\n"), 0o600)
	git(t, checkout, "config", "--add", "include.path", shared)
	git(t, checkout, "config", "--add", "include.path", "later.gitconfig")
	f := newFixture(t, "")
	ctx := context.Background()
	run := f.newRun(t, "r0000s04", checkout)
	wd, err := f.d.Workdir(ctx, run, Options{})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(shared, []byte("[core]\n\tfsmonitor = touch pwned\n"), 0o600)
	later := filepath.Join(checkout, ".git", "later.gitconfig")
	os.WriteFile(later, []byte("[core]\n\tsshCommand = touch pwned\n"), 0o600)
	os.WriteFile(filepath.Join(wd, "new.txt"), []byte("x\n"), 0o600)
	if _, err := f.d.Deliver(ctx, run, Options{}, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(shared); string(b) != "[user]\n\tname = Person\n" {
		t.Errorf("the included file is now %q", b)
	}
	if _, err := os.Stat(later); err == nil {
		t.Error("the include the agent created is still there")
	}
	if _, err := os.Stat(filepath.Join(wd, "pwned")); err == nil {
		t.Error("the agent's fsmonitor ran")
	}
}

// TestRemoteURLCredentialsStayOutOfErrors: fetches and pushes name the
// recorded URL; credentials in it never reach an error.
func TestRemoteURLCredentialsStayOutOfErrors(t *testing.T) {
	t.Parallel()
	origin, checkout := repos(t)
	url := gitHTTP(t, filepath.Dir(origin), "the-token")
	u := strings.Replace(url, "http://", "http://person:sekrit-pw@", 1) + "/missing.git"
	git(t, checkout, "remote", "set-url", "origin", u)
	f := newFixture(t, "")
	run := f.newRun(t, "r0000s05", checkout)
	_, err := f.d.Workdir(context.Background(), run, prOpts)
	if err == nil {
		t.Fatal("fetch from a missing repository worked")
	}
	if strings.Contains(err.Error(), "sekrit-pw") {
		t.Fatalf("the URL's password is in the error: %v", err)
	}
	t.Log(err)
}

// TestReleaseRestoresTheCheckoutOfARunThatIsNotDelivered: a run that ends
// failed or cancelled (or parks) before its delivery gets the checkout's
// configuration and hooks back all the same, and keeps its worktree; a
// change made after that (the person's own, no turn since) is left alone.
func TestReleaseRestoresTheCheckoutOfARunThatIsNotDelivered(t *testing.T) {
	t.Parallel()
	for _, status := range []store.RunStatus{store.RunFailed, store.RunCancelled, store.RunWaiting} {
		t.Run(string(status), func(t *testing.T) {
			t.Parallel()
			_, checkout := repos(t)
			f := newFixture(t, "")
			ctx := context.Background()
			run := f.newRun(t, "r0000s0r", checkout)
			wd, err := f.d.Workdir(ctx, run, Options{})
			if err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(filepath.Join(checkout, ".git", "config"))
			git(t, wd, "config", "core.sshCommand", "touch pwned")
			hook := filepath.Join(checkout, ".git", "hooks", "post-commit")
			if err := os.WriteFile(hook, []byte("#!/bin/sh\ntrue\n"), 0o700); err != nil {
				t.Fatal(err)
			}
			run.Status = status
			if err := f.d.Release(ctx, run); err != nil {
				t.Fatal(err)
			}
			if after, _ := os.ReadFile(filepath.Join(checkout, ".git", "config")); !bytes.Equal(before, after) {
				t.Fatalf("the checkout's config is:\n%s\nwas:\n%s", after, before)
			}
			if _, err := os.Stat(hook); err == nil {
				t.Fatal("the checkout keeps the hook")
			}
			if _, err := os.Stat(filepath.Join(wd, ".git")); err != nil {
				t.Fatalf("the worktree is gone: %v", err)
			}
			// The person's change after the run's turn is theirs.
			git(t, checkout, "config", "user.signingkey", "mine")
			if err := f.d.Release(ctx, run); err != nil {
				t.Fatal(err)
			}
			if got := git(t, checkout, "config", "user.signingkey"); got != "mine" {
				t.Fatalf("a second Release undid the person's change: %q", got)
			}
		})
	}
}
