package delivery

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/secretscan"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// fakeGitHubToken is a token-shaped value made at test time (never a
// literal in a fixture).
func fakeGitHubToken() string {
	return "ghp" + "_" + strings.Repeat("x7Kq2", 7) + "a"
}

// writeWork writes what a run's agent left: a token in config.env (line
// 2), an ordinary change, and a file over a 1 KiB limit.
func writeWork(t *testing.T, wd, token string) {
	t.Helper()
	for name, content := range map[string][]byte{
		"config.env": []byte("MODE=prod\nGITHUB_TOKEN=" + token + "\n"),
		"ok.txt":     []byte("an ordinary change\n"),
		"big.bin":    bytes.Repeat([]byte("0123456789abcdef"), 128), // 2 KiB
	} {
		if err := os.WriteFile(filepath.Join(wd, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDeliverHoldsBackSecretsAndOversizedFiles(t *testing.T) {
	t.Parallel()
	for _, agentCommits := range []bool{false, true} {
		name := map[bool]string{false: "left in the worktree", true: "committed by the agent"}[agentCommits]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			origin, checkout := repos(t)
			f := newFixture(t, "")
			ctx := context.Background()
			run := f.newRun(t, "r00000s1", checkout)
			o := Options{Push: true, MaxFileSize: 1024}
			wd, err := f.d.Workdir(ctx, run, o)
			if err != nil {
				t.Fatal(err)
			}
			token := fakeGitHubToken()
			writeWork(t, wd, token)
			if agentCommits {
				git(t, wd, "add", "--all")
				git(t, wd, "commit", "--quiet", "-m", "the agent's own commit")
			}
			_, err = f.d.Deliver(ctx, run, o, nil)
			var held *secretscan.Error
			if !errors.As(err, &held) {
				t.Fatalf("Deliver = %v, want a *secretscan.Error", err)
			}
			want := []secretscan.Finding{{Path: "big.bin", Kind: secretscan.KindOversized, Size: 2048, Limit: 1024},
				{Path: "config.env", Line: 2, Kind: "GitHub token"}}
			if len(held.Findings) != 2 || held.Findings[0] != want[0] || held.Findings[1] != want[1] {
				t.Fatalf("findings = %v", held.Findings)
			}
			if strings.Contains(err.Error(), token) {
				t.Fatalf("the error holds the token: %v", err)
			}
			if refs := git(t, origin, "for-each-ref", "refs/heads/orchestrator"); refs != "" {
				t.Fatalf("pushed although held back: %s", refs)
			}
			if dl, _, _ := f.st.Delivery(ctx, run.ID); dl.State != store.DeliveryPrepared {
				t.Fatalf("delivery state = %s", dl.State)
			}

			res, err := f.d.DeliverWithout(ctx, run, o, nil)
			if err != nil || !res.Delivery.Pushed {
				t.Fatalf("DeliverWithout = %+v, %v", res, err)
			}
			branch := "refs/heads/" + res.Delivery.Branch
			if files := git(t, origin, "ls-tree", "-r", "--name-only", branch); files != "README.md\nok.txt" {
				t.Fatalf("pushed tree: %q", files)
			}
			if hist := git(t, origin, "log", "-p", "--all"); strings.Contains(hist, token) || strings.Contains(hist, "0123456789abcdef") {
				t.Fatal("a commit on the remote holds what was left out")
			}
			if b, err := os.ReadFile(filepath.Join(wd, "config.env")); err != nil || !strings.Contains(string(b), token) {
				t.Fatalf("config.env in the worktree: %q, %v", b, err)
			}
		})
	}
}

func TestDeliverLeavesASecretTheBaseHadAlone(t *testing.T) {
	t.Parallel()
	_, checkout := repos(t)
	token := fakeGitHubToken()
	os.WriteFile(filepath.Join(checkout, "fixture.env"), []byte("TOKEN="+token+"\n"), 0o600)
	git(t, checkout, "add", ".")
	git(t, checkout, "commit", "--quiet", "-m", "a fixture")
	git(t, checkout, "push", "--quiet", "origin", "main")
	f := newFixture(t, "")
	ctx := context.Background()
	run := f.newRun(t, "r00000s2", checkout)
	o := Options{Push: true}
	wd, err := f.d.Workdir(ctx, run, o)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wd, "fixture.env"), []byte("# a comment\nTOKEN="+token+"\n"), 0o600)
	if res, err := f.d.Deliver(ctx, run, o, nil); err != nil || !res.Delivery.Pushed {
		t.Fatalf("Deliver = %+v, %v", res, err)
	}
}

func TestParkLeavesSecretsOut(t *testing.T) {
	t.Parallel()
	origin, checkout := repos(t)
	f := newFixture(t, "")
	ctx := context.Background()
	run := f.newRun(t, "r00000s3", checkout)
	o := Options{Push: true, MaxFileSize: 1024}
	wd, err := f.d.Workdir(ctx, run, o)
	if err != nil {
		t.Fatal(err)
	}
	token := fakeGitHubToken()
	writeWork(t, wd, token)
	if err := f.d.Park(ctx, run, o); err != nil {
		t.Fatal(err)
	}
	branch := "refs/heads/orchestrator/nightly-deps/r00000s3"
	if files := git(t, origin, "ls-tree", "-r", "--name-only", branch); files != "README.md\nok.txt" {
		t.Fatalf("parked tree: %q", files)
	}
	tip := git(t, origin, "rev-parse", branch)
	// Parking again: the files left out are still there, nothing new.
	if err := f.d.Park(ctx, run, o); err != nil {
		t.Fatal(err)
	}
	if again := git(t, origin, "rev-parse", branch); again != tip {
		t.Fatalf("second park moved the branch to %s", again)
	}
	// The final delivery asks about them.
	var held *secretscan.Error
	if _, err := f.d.Deliver(ctx, run, o, nil); !errors.As(err, &held) || len(held.Findings) != 2 {
		t.Fatalf("Deliver after park = %v", err)
	}
}

// TestPRBodyRedactsEveryShapeTheScreenKnows: a secret in the model's summary
// (an AWS key here, which the output's redaction does not know) reaches
// neither the pull request nor the commit message.
func TestPRBodyRedactsEveryShapeTheScreenKnows(t *testing.T) {
	t.Parallel()
	key := "AKIA" + "QW3RT5Y7U2IOPASD"
	r := Report{RunID: "r1", Spec: "deps", Summary: "Set the key " + key + " in config.env."}
	for what, s := range map[string]string{"title": r.PRTitle(), "body": r.PRBody(), "commit message": r.CommitMessage()} {
		if strings.Contains(s, key) || !strings.Contains(s, "[REDACTED]") {
			t.Errorf("%s: %q", what, s)
		}
	}
}

// TestDeliverLeavesAMovedSecretAlone: a file the base held, with a token,
// moved (and changed a little) is not the run's secret.
func TestDeliverLeavesAMovedSecretAlone(t *testing.T) {
	t.Parallel()
	_, checkout := repos(t)
	token := fakeGitHubToken()
	body := "TOKEN=" + token + "\n" + strings.Repeat("fixture line\n", 20)
	os.WriteFile(filepath.Join(checkout, "fixture.env"), []byte(body), 0o600)
	git(t, checkout, "add", ".")
	git(t, checkout, "commit", "--quiet", "-m", "a fixture")
	git(t, checkout, "push", "--quiet", "origin", "main")
	f := newFixture(t, "")
	ctx := context.Background()
	run := f.newRun(t, "r00000s4", checkout)
	o := Options{Push: true}
	wd, err := f.d.Workdir(ctx, run, o)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(wd, "testdata"), 0o700)
	os.WriteFile(filepath.Join(wd, "testdata", "moved.env"), []byte(body+"one more line\n"), 0o600)
	os.Remove(filepath.Join(wd, "fixture.env"))
	if res, err := f.d.Deliver(ctx, run, o, nil); err != nil || !res.Delivery.Pushed {
		t.Fatalf("Deliver = %+v, %v", res, err)
	}
}
