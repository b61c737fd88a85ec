package delivery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

// git runs git in dir for a test, with a fixed identity.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Person", "GIT_AUTHOR_EMAIL=person@example.com",
		"GIT_COMMITTER_NAME=Person", "GIT_COMMITTER_EMAIL=person@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// repos makes a bare origin with one commit on main and a clone of it (the
// person's checkout).
func repos(t *testing.T) (origin, checkout string) {
	t.Helper()
	clitest.Git(t)
	dir := t.TempDir()
	origin = filepath.Join(dir, "origin.git")
	seed := filepath.Join(dir, "seed")
	git(t, dir, "init", "--quiet", "--bare", "--initial-branch=main", origin)
	git(t, dir, "init", "--quiet", "--initial-branch=main", seed)
	os.WriteFile(filepath.Join(seed, "README.md"), []byte("hello\n"), 0o600)
	git(t, seed, "add", ".")
	git(t, seed, "commit", "--quiet", "-m", "first")
	git(t, seed, "push", "--quiet", origin, "main")
	checkout = filepath.Join(dir, "checkout")
	git(t, dir, "clone", "--quiet", origin, checkout)
	return origin, checkout
}

type fixture struct {
	st *store.Store
	d  *Deliverer
	gh *githubtest.Server
}

func newFixture(t *testing.T, token string) *fixture {
	t.Helper()
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
	d, err := New(Config{Store: st, PRs: prs, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{st: st, d: d, gh: gh}
}

// newRun stores a run in workdir that asked one question, answered by
// @alice on GitHub, and finished with a summary.
func (f *fixture) newRun(t *testing.T, id, workdir string) store.Run {
	t.Helper()
	ctx := context.Background()
	run, err := f.st.CreateRun(ctx, store.Run{ID: id, Spec: "nightly-deps", Title: "nightly-deps", Prompt: "Update", WorkDir: workdir})
	if err != nil {
		t.Fatal(err)
	}
	tt, err := f.st.BeginTurn(ctx, store.Turn{RunID: id, Kind: store.TurnStart, Prompt: "Update"})
	if err != nil {
		t.Fatal(err)
	}
	set := questions.NewSet(id, tt.Seq, []questions.Question{{Text: "Which version?", Header: "Version",
		Options: []questions.Option{{Label: "v2"}, {Label: "v3"}}}})
	if err := f.st.FinishTurn(ctx, id, tt.Seq, store.TurnResult{Status: "success", CostUSD: 0.01}, &set, []string{"github"}); err != nil {
		t.Fatal(err)
	}
	qid := set.Questions[0].ID
	if _, err := f.st.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "@alice", Surface: "github", At: time.Now(),
		Answers: []questions.Answer{{QuestionID: qid, Labels: []string{"v3"}}}}); err != nil {
		t.Fatal(err)
	}
	run.FinalText = "Updated to v3."
	return run
}

var prOpts = Options{Push: true, Repo: "acme/app", PullRequest: &PROptions{Reviewers: []string{"octocat"}, Labels: []string{"orchestrator"}}}

func TestDeliverCommitsPushesAndOpensOnePR(t *testing.T) {
	t.Parallel()
	origin, checkout := repos(t)
	f := newFixture(t, "")
	ctx := context.Background()
	run := f.newRun(t, "r0000001", checkout)
	wd, err := f.d.Workdir(ctx, run, prOpts)
	if err != nil {
		t.Fatal(err)
	}
	if wd == checkout || !strings.HasPrefix(wd, f.st.Dir()) {
		t.Fatalf("workdir %s: want a worktree under the state directory", wd)
	}
	if again, err := f.d.Workdir(ctx, run, prOpts); err != nil || again != wd {
		t.Fatalf("second Workdir = %s, %v; want %s", again, err, wd)
	}
	os.WriteFile(filepath.Join(wd, "go.mod"), []byte("module x\n"), 0o600)
	res, err := f.d.Deliver(ctx, run, prOpts, nil)
	if err != nil {
		t.Fatal(err)
	}
	dl := res.Delivery
	if !res.Changed || dl.State != store.DeliveryOpened || dl.PRNumber == 0 || !dl.Pushed {
		t.Fatalf("delivery = %+v", dl)
	}
	if got := git(t, origin, "rev-parse", "refs/heads/orchestrator/nightly-deps/r0000001"); got != dl.CommitSHA {
		t.Fatalf("origin's branch at %s, want %s", got, dl.CommitSHA)
	}
	if parent := git(t, origin, "rev-parse", dl.CommitSHA+"^"); parent != git(t, origin, "rev-parse", "main") {
		t.Fatalf("the commit is not on top of main")
	}
	author := git(t, origin, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", dl.CommitSHA)
	if !strings.HasPrefix(author, "orchestrator <orchestrator@localhost>|orchestrator <orchestrator@localhost>|nightly-deps\n\nUpdated to v3.") ||
		strings.Contains(author, "Co-authored-by") {
		t.Fatalf("commit = %q", author)
	}
	pulls := f.gh.Pulls("acme/app")
	if len(pulls) != 1 {
		t.Fatalf("pull requests = %+v, want 1", pulls)
	}
	pr := pulls[0]
	t.Logf("PR title %q body:\n%s", pr.Title, pr.Body)
	for _, want := range []string{"Updated to v3.", "Version: Which version?", "v2 / v3", "| v3 |", "@alice", "github", "Marker"} {
		if want == "Marker" {
			want = Marker(run.ID)
		}
		if !strings.Contains(pr.Body, want) {
			t.Errorf("PR body lacks %q:\n%s", want, pr.Body)
		}
	}
	if pr.Head != dl.Branch || pr.Base != "main" || strings.Join(pr.Reviewers, ",") != "octocat" || strings.Join(pr.Labels, ",") != "orchestrator" {
		t.Errorf("PR = %+v", pr)
	}
	// The person's checkout: same branch, clean, without the change.
	if b := git(t, checkout, "branch", "--show-current"); b != "main" {
		t.Errorf("checkout on %s", b)
	}
	if s := git(t, checkout, "status", "--porcelain"); s != "" {
		t.Errorf("checkout not clean: %s", s)
	}
	// Delivering again (a retry, a restart) updates the PR, never a second.
	dl.State = store.DeliveryPushed
	if err := f.st.SaveDelivery(ctx, dl); err != nil {
		t.Fatal(err)
	}
	if _, err := f.d.Deliver(ctx, run, prOpts, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(f.gh.Pulls("acme/app")); n != 1 {
		t.Fatalf("%d pull requests after a retry, want 1", n)
	}
	run.Status = store.RunDone
	if err := f.d.Finish(ctx, run); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wd); !os.IsNotExist(err) {
		t.Fatalf("worktree left after a done run: %v", err)
	}
	if list := git(t, checkout, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Fatalf("worktrees left:\n%s", list)
	}
}

func TestDeliverWithoutChangeOpensNothing(t *testing.T) {
	t.Parallel()
	origin, checkout := repos(t)
	f := newFixture(t, "")
	ctx := context.Background()
	run := f.newRun(t, "r0000002", checkout)
	if _, err := f.d.Workdir(ctx, run, prOpts); err != nil {
		t.Fatal(err)
	}
	res, err := f.d.Deliver(ctx, run, prOpts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed || res.Delivery.State != store.DeliveryUnchanged || !strings.Contains(res.Line(), "no change") {
		t.Fatalf("result = %+v", res)
	}
	if n := len(f.gh.Pulls("acme/app")); n != 0 {
		t.Fatalf("%d pull requests, want none", n)
	}
	if out := git(t, origin, "branch", "--list", "orchestrator/*"); out != "" {
		t.Fatalf("branches on origin: %s", out)
	}
	run.Status = store.RunDone
	if err := f.d.Finish(ctx, run); err != nil {
		t.Fatal(err)
	}
	if out := git(t, checkout, "branch", "--list", "orchestrator/*"); out != "" {
		t.Fatalf("an empty branch was left: %s", out)
	}
}

func TestTwoRunsGetTwoWorktreesAndBranches(t *testing.T) {
	t.Parallel()
	_, checkout := repos(t)
	f := newFixture(t, "")
	ctx := context.Background()
	a, err := f.d.Workdir(ctx, f.newRun(t, "r000000a", checkout), prOpts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.d.Workdir(ctx, f.newRun(t, "r000000b", checkout), prOpts)
	if err != nil {
		t.Fatal(err)
	}
	if a == b || git(t, a, "branch", "--show-current") == git(t, b, "branch", "--show-current") {
		t.Fatalf("worktrees %s and %s share a branch", a, b)
	}
}

func TestWorkdirFoundAgainAfterTheWorktreeWentAway(t *testing.T) {
	t.Parallel()
	_, checkout := repos(t)
	f := newFixture(t, "")
	ctx := context.Background()
	run := f.newRun(t, "r0000003", checkout)
	wd, err := f.d.Workdir(ctx, run, prOpts)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wd, "x.txt"), []byte("x"), 0o600)
	git(t, wd, "add", ".")
	git(t, wd, "commit", "--quiet", "-m", "work in progress")
	head := git(t, wd, "rev-parse", "HEAD")
	if err := os.RemoveAll(wd); err != nil {
		t.Fatal(err)
	}
	again, err := f.d.Workdir(ctx, run, prOpts)
	if err != nil || again != wd {
		t.Fatalf("Workdir = %s, %v", again, err)
	}
	if got := git(t, wd, "rev-parse", "HEAD"); got != head {
		t.Fatalf("recreated worktree at %s, want the branch's %s", got, head)
	}
}

func TestWorkdirErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	ctx := context.Background()
	plain := t.TempDir()
	run := f.newRun(t, "r0000004", plain)
	if _, err := f.d.Workdir(ctx, run, prOpts); !errors.Is(err, ErrNotRepository) || !strings.Contains(err.Error(), plain) {
		t.Fatalf("not a repository: %v", err)
	}
	missing := &Deliverer{cfg: f.d.cfg, log: f.d.log}
	missing.cfg.Git = Git{Bin: "git-that-does-not-exist"}
	if _, err := missing.Workdir(ctx, run, prOpts); !errors.Is(err, ErrGitMissing) {
		t.Fatalf("git missing: %v", err)
	}
}

func TestPushRejectedNonFastForward(t *testing.T) {
	t.Parallel()
	origin, checkout := repos(t)
	f := newFixture(t, "")
	ctx := context.Background()
	run := f.newRun(t, "r0000005", checkout)
	wd, err := f.d.Workdir(ctx, run, prOpts)
	if err != nil {
		t.Fatal(err)
	}
	// Someone else pushed to the run's branch meanwhile.
	other := filepath.Join(t.TempDir(), "other")
	git(t, filepath.Dir(other), "clone", "--quiet", origin, other)
	os.WriteFile(filepath.Join(other, "theirs.txt"), []byte("theirs"), 0o600)
	git(t, other, "add", ".")
	git(t, other, "commit", "--quiet", "-m", "theirs")
	git(t, other, "push", "--quiet", "origin", "HEAD:refs/heads/orchestrator/nightly-deps/r0000005")
	os.WriteFile(filepath.Join(wd, "ours.txt"), []byte("ours"), 0o600)
	_, err = f.d.Deliver(ctx, run, prOpts, nil)
	if !errors.Is(err, ErrPushRejected) || !strings.Contains(err.Error(), "not a fast-forward") || !strings.Contains(err.Error(), "kept") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(wd, "ours.txt")); err != nil {
		t.Fatalf("worktree not kept: %v", err)
	}
	if n := len(f.gh.Pulls("acme/app")); n != 0 {
		t.Fatalf("%d pull requests after a rejected push", n)
	}
}

// gitHTTP serves origin over smart HTTP (git http-backend) behind basic
// auth that wants token as the password; it records whether every request
// carried it.
func gitHTTP(t *testing.T, root, token string) string {
	t.Helper()
	backend := clitest.GitHTTPBackend(t)
	// http-backend accepts a push from an authenticated user (REMOTE_USER).
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=x"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pass, ok := r.BasicAuth(); !ok || pass != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "auth", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestPushOverHTTPSHandsTheTokenThroughAskpass(t *testing.T) {
	t.Parallel()
	origin, checkout := repos(t)
	const token = "tok-secret-123"
	url := gitHTTP(t, filepath.Dir(origin), token) + "/origin.git"
	git(t, checkout, "remote", "set-url", "origin", url)
	for _, tc := range []struct {
		name, token string
		wantErr     bool
	}{{"right token", token, false}, {"wrong token", "nope", true}} {
		f := newFixture(t, tc.token)
		ctx := context.Background()
		run := f.newRun(t, "r00000"+map[bool]string{false: "0a", true: "0b"}[tc.wantErr], checkout)
		wd, err := f.d.Workdir(ctx, run, prOpts)
		if tc.wantErr {
			if err == nil {
				t.Fatalf("%s: fetch with a wrong token worked", tc.name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		os.WriteFile(filepath.Join(wd, "new.txt"), []byte("x"), 0o600)
		if _, err := f.d.Deliver(ctx, run, prOpts, nil); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if cfg, _ := os.ReadFile(filepath.Join(checkout, ".git", "config")); strings.Contains(string(cfg), token) {
			t.Fatal("the token is in the repository's config")
		}
	}
}

func TestPushAuthRejected(t *testing.T) {
	t.Parallel()
	origin, checkout := repos(t)
	f := newFixture(t, "right-token")
	ctx := context.Background()
	run := f.newRun(t, "r0000006", checkout)
	// The remote is fetched from the local origin; its push URL wants
	// credentials the run does not have.
	git(t, checkout, "remote", "set-url", "--push", "origin", gitHTTP(t, filepath.Dir(origin), "another-token")+"/origin.git")
	wd, err := f.d.Workdir(ctx, run, prOpts)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wd, "x.txt"), []byte("x"), 0o600)
	_, err = f.d.Deliver(ctx, run, prOpts, nil)
	if !errors.Is(err, ErrPushRejected) || !strings.Contains(err.Error(), "credentials") || strings.Contains(err.Error(), "right-token") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(wd); err != nil {
		t.Fatalf("worktree not kept: %v", err)
	}
}

func TestGCRemovesOldEndedWorktrees(t *testing.T) {
	t.Parallel()
	_, checkout := repos(t)
	f := newFixture(t, "")
	ctx := context.Background()
	run := f.newRun(t, "r0000007", checkout)
	wd, err := f.d.Workdir(ctx, run, prOpts)
	if err != nil {
		t.Fatal(err)
	}
	msg := "boom"
	if err := f.st.UpdateRun(ctx, run.ID, store.RunUpdate{Status: store.RunFailed, Error: &msg}); err != nil {
		t.Fatal(err)
	}
	if removed, err := f.d.GC(ctx, time.Hour); err != nil || len(removed) != 0 {
		t.Fatalf("young worktree removed: %v, %v", removed, err)
	}
	removed, err := f.d.GC(ctx, 0)
	if err != nil || len(removed) != 1 || removed[0].Worktree != wd {
		t.Fatalf("GC = %+v, %v", removed, err)
	}
	if _, err := os.Stat(wd); !os.IsNotExist(err) {
		t.Fatalf("worktree still there: %v", err)
	}
}

// TestWorkdirRecreatedFromThePushedBranch: the worktree and its local
// branch are gone (another machine, a cleaned state directory); the run
// gets its worktree back from the branch it pushed.
func TestWorkdirRecreatedFromThePushedBranch(t *testing.T) {
	t.Parallel()
	_, checkout := repos(t)
	f := newFixture(t, "")
	ctx := context.Background()
	run := f.newRun(t, "r0000008", checkout)
	opts := Options{Push: true}
	wd, err := f.d.Workdir(ctx, run, opts)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wd, "x.txt"), []byte("x"), 0o600)
	res, err := f.d.Deliver(ctx, run, opts, nil)
	if err != nil || !res.Delivery.Pushed {
		t.Fatalf("deliver: %+v, %v", res, err)
	}
	if err := os.RemoveAll(wd); err != nil {
		t.Fatal(err)
	}
	git(t, checkout, "worktree", "prune")
	git(t, checkout, "branch", "-D", res.Delivery.Branch)
	again, err := f.d.Workdir(ctx, run, opts)
	if err != nil || again != wd {
		t.Fatalf("Workdir = %s, %v", again, err)
	}
	if got := git(t, wd, "rev-parse", "HEAD"); got != res.Delivery.CommitSHA {
		t.Fatalf("recreated at %s, want the pushed %s", got, res.Delivery.CommitSHA)
	}
}

// TestStateDirInsideTheCheckoutLeavesItClean: state_dir: ./state beside
// the repository: the run's worktree is added outside the checkout, and
// the checkout's status stays clean through the run and its delivery.
func TestStateDirInsideTheCheckoutLeavesItClean(t *testing.T) {
	t.Parallel()
	_, checkout := repos(t)
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(checkout, "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	away := t.TempDir()
	d, err := New(Config{Store: st, AwayBase: away})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, d: d}
	run := f.newRun(t, "r0000099", checkout)
	wd, err := d.Workdir(ctx, run, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rel, err := filepath.Rel(checkout, wd); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the worktree %s is inside the checkout %s", wd, checkout)
	}
	if !strings.HasPrefix(wd, away) {
		t.Fatalf("the worktree %s is not under %s", wd, away)
	}
	if out := git(t, checkout, "status", "--porcelain", "--untracked-files=all"); out != "" {
		t.Fatalf("the checkout is not clean after the worktree was added:\n%s", out)
	}
	os.WriteFile(filepath.Join(wd, "x.txt"), []byte("x"), 0o600)
	if _, err := d.Deliver(ctx, run, Options{}, nil); err != nil {
		t.Fatal(err)
	}
	if out := git(t, checkout, "status", "--porcelain", "--untracked-files=all"); out != "" {
		t.Fatalf("the checkout is not clean after delivery:\n%s", out)
	}
}

// TestGCReportsOnlyWhatItRemoved: a removal that leaves the worktree on
// disk (git said it removed it) is an error, and the worktree is not
// reported removed.
func TestGCReportsOnlyWhatItRemoved(t *testing.T) {
	t.Parallel()
	_, checkout := repos(t)
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	// A git whose "worktree remove" says it worked and does nothing.
	bin := filepath.Join(t.TempDir(), "git")
	script := "#!/bin/sh\nif [ \"$1\" = worktree ] && [ \"$2\" = remove ]; then exit 0; fi\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "")
	f.d.cfg.Git = Git{Bin: bin}
	ctx := context.Background()
	run := f.newRun(t, "r0000098", checkout)
	wd, err := f.d.Workdir(ctx, run, prOpts)
	if err != nil {
		t.Fatal(err)
	}
	// Something in the worktree that RemoveAll cannot be tried on: git
	// said it worked, so only the check after finds it still there.
	msg := "boom"
	if err := f.st.UpdateRun(ctx, run.ID, store.RunUpdate{Status: store.RunFailed, Error: &msg}); err != nil {
		t.Fatal(err)
	}
	removed, err := f.d.GC(ctx, 0)
	if err == nil || !strings.Contains(err.Error(), "still there") {
		t.Fatalf("GC error = %v, want the worktree still there", err)
	}
	if len(removed) != 0 {
		t.Fatalf("GC reported %+v removed; %s is still on disk", removed, wd)
	}
	if _, err := os.Stat(wd); err != nil {
		t.Fatalf("worktree: %v", err)
	}
}

// TestRunsOfOneCheckoutAtOnce adds the worktrees of several runs of one
// checkout at once. Each fetches into the checkout and adds its worktree;
// unserialized, a fetch's connectivity check meets another run's worktree
// being added, whose HEAD is still the null object id ("bad object
// worktrees/<run>/HEAD"), or two fetches race for origin's refs.
func TestRunsOfOneCheckoutAtOnce(t *testing.T) {
	t.Parallel()
	_, checkout := repos(t)
	f := newFixture(t, "")
	ctx := context.Background()
	const n = 8
	runs := make([]store.Run, n)
	for i := range runs {
		runs[i] = f.newRun(t, fmt.Sprintf("r%07d", i), checkout)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = f.d.Workdir(ctx, run, prOpts)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("run %s: %v", runs[i].ID, err)
		}
	}
	if list := git(t, checkout, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != n+1 {
		t.Errorf("the checkout has these worktrees, want %d more than itself:\n%s", n, list)
	}
}
