package delivery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRepoOfURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://github.com/acme/api.git":                       "acme/api",
		"https://x-access-token:ghs_secret@github.com/acme/api": "acme/api",
		"https://ghe.example.com/api/v3/../acme/API/":           "acme/API",
		"git@github.com:acme/api.git":                           "acme/api",
		"github.com:acme/api":                                   "acme/api",
		"ssh://git@github.com:22/acme/api.git":                  "acme/api",
		"/srv/git/acme/api.git":                                 "acme/api",
		"../acme/api":                                           "acme/api",
		`C:\git\acme\api.git`:                                   "acme/api",
		"file:///srv/acme/api.git":                              "acme/api",
		"api.git":                                               "",
		"https://github.com/":                                   "",
		"":                                                      "",
	} {
		got, ok := RepoOfURL(in)
		if got != want || ok != (want != "") {
			t.Errorf("RepoOfURL(%q) = %q, %v; want %q", in, got, ok, want)
		}
		if strings.Contains(got, "secret") {
			t.Errorf("RepoOfURL(%q) shows the token", in)
		}
	}
}

// TestWorkdirRefusesACheckoutOfAnotherRepository: a run that must deliver
// to acme/api (Options.RemoteRepo) gets no worktree from a checkout whose
// origin is acme/app, nor from one without a remote: the error says which
// repository the checkout is; one whose origin is acme/api (any case) gets
// its worktree.
func TestWorkdirRefusesACheckoutOfAnotherRepository(t *testing.T) {
	t.Parallel()
	origin, checkout := repos(t)
	ctx := context.Background()
	f := newFixture(t, "")
	var re *RemoteRepoError
	// origin.git is no owner/name: the checkout's origin is …/acme/app.git.
	app := filepath.Join(filepath.Dir(origin), "acme", "app.git")
	if err := os.MkdirAll(filepath.Dir(app), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(origin, app); err != nil {
		t.Fatal(err)
	}
	git(t, checkout, "remote", "set-url", "origin", app)

	opts := prOpts
	opts.RemoteRepo = "acme/api"
	if err := (Git{}).CheckRemoteRepo(ctx, checkout, opts); !errors.As(err, &re) || re.Got != "acme/app" {
		t.Fatalf("CheckRemoteRepo = %v, want a RemoteRepoError naming acme/app", err)
	}
	_, err := f.d.Workdir(ctx, f.newRun(t, "r0000001", checkout), opts)
	if !errors.As(err, &re) || re.Got != "acme/app" || re.Want != "acme/api" || !strings.Contains(err.Error(), "is a checkout of acme/app") {
		t.Fatalf("Workdir = %v, want a RemoteRepoError naming acme/app", err)
	}
	if list := git(t, checkout, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Errorf("a worktree was added:\n%s", list)
	}
	// A push URL elsewhere is refused too.
	git(t, checkout, "remote", "set-url", "--push", "origin", "https://github.com/acme/other.git")
	opts.RemoteRepo = "acme/app"
	if _, err := f.d.Workdir(ctx, f.newRun(t, "r0000002", checkout), opts); !errors.As(err, &re) || re.Got != "acme/other" {
		t.Fatalf("Workdir with a push URL of acme/other = %v", err)
	}
	git(t, checkout, "config", "--unset", "remote.origin.pushurl")

	opts.RemoteRepo = "ACME/App"
	if err := (Git{}).CheckRemoteRepo(ctx, filepath.Join(checkout, "sub"), opts); err == nil || errors.As(err, &re) {
		t.Errorf("CheckRemoteRepo of a missing folder = %v", err)
	}
	if err := (Git{}).CheckRemoteRepo(ctx, checkout, opts); err != nil {
		t.Errorf("CheckRemoteRepo of a checkout of acme/app: %v", err)
	}
	if _, err := f.d.Workdir(ctx, f.newRun(t, "r0000003", checkout), opts); err != nil {
		t.Fatalf("Workdir of a checkout of acme/app: %v", err)
	}

	git(t, checkout, "remote", "remove", "origin")
	if _, err := f.d.Workdir(ctx, f.newRun(t, "r0000004", checkout), opts); !errors.As(err, &re) || re.Got != "" || !strings.Contains(err.Error(), `has no remote "origin"`) {
		t.Fatalf("Workdir without a remote = %v", err)
	}
}
