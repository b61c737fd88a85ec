package main

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/surfaces/discord/discordtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

// stubClaude writes a `claude` that prints version and counts its calls
// in a file beside it.
func stubClaude(t *testing.T, version string) (path, calls string) {
	t.Helper()
	dir := t.TempDir()
	path = filepath.Join(dir, "claude")
	calls = filepath.Join(dir, "calls")
	body := fmt.Sprintf("#!/bin/sh\necho x >> '%s'\necho '%s (Claude Code)'\n", calls, version)
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, calls
}

func countCalls(t *testing.T, calls string) int {
	t.Helper()
	b, err := os.ReadFile(calls)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "x\n")
}

// doctorDir writes a config of the state dir, agent.command and more.
func doctorDir(t *testing.T, claude, more string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("state_dir: %q\nagent:\n  command: %q\n%s", filepath.Join(dir, "state"), claude, more)
	if err := os.WriteFile(filepath.Join(dir, DefaultConfigFile), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func githubConfig(url string) string {
	return fmt.Sprintf("surfaces:\n  github:\n    enabled: true\n    base_url: %q\n    repo: acme/app\n    token: ${GH_TOKEN}\n"+
		"git:\n  enabled: true\n  pull_request:\n    enabled: true\n", url)
}

// TestDoctorNamesMissingPullRequestsAndOldCLI: a fine-grained token without
// the pull-request permission is reported by name, and an old CLI together
// with the tested versions; doctor exits 1.
func TestDoctorNamesMissingPullRequestsAndOldCLI(t *testing.T) {
	t.Parallel()
	gh := githubtest.NewServer(t)
	gh.RequireToken("github_pat_fake")
	gh.SetTokenPermissions(map[string]string{"issues": "write", "contents": "write", "metadata": "read"})
	gh.SetPermission("orchestrator-bot", "write")
	claude, _ := stubClaude(t, "1.0.0")
	dir := doctorDir(t, claude, githubConfig(gh.URL()))
	code, out, _ := inDir(t, dir, map[string]string{"GH_TOKEN": "github_pat_fake"}, "", "doctor")
	if code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	for _, want := range []string{
		`has no "Pull requests" permission on acme/app`, "pull_requests=read",
		"Claude Code 1.0.0, older than the tested versions " + executor.TestedCLIRange(),
		"install " + executor.TestedCLINewest,
		"ok       store",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "github_pat_fake") {
		t.Error("doctor prints the token")
	}
	if strings.Contains(out, `"Issues" permission`) || strings.Contains(out, `"Contents" permission`) {
		t.Errorf("doctor reports permissions the token has:\n%s", out)
	}
}

func TestDoctorClassicToken(t *testing.T) {
	t.Parallel()
	claude, _ := stubClaude(t, executor.TestedCLIOldest)
	for _, tc := range []struct {
		name   string
		scopes []string
		perm   string
		code   int
		want   []string
	}{
		{"no repo scope", []string{"read:user", "gist"}, "write", exitFailed, []string{"lacks the scope public_repo (or repo)", "it has: gist, read:user"}},
		{"no write access", []string{"repo"}, "read", exitFailed, []string{"cannot push to acme/app"}},
		{"all good", []string{"repo", "workflow"}, "write", 0, []string{"ok       github: the classic token", "ok       agent CLI", "(tested: " + executor.TestedCLIRange() + ")"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gh := githubtest.NewServer(t)
			gh.RequireToken("ghp_fake")
			gh.SetTokenScopes(tc.scopes...)
			gh.SetPermission("orchestrator-bot", tc.perm)
			dir := doctorDir(t, claude, githubConfig(gh.URL()))
			code, out, _ := inDir(t, dir, map[string]string{"GH_TOKEN": "ghp_fake"}, "", "doctor")
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("doctor does not say %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestDoctorBadTokenAndWebhook(t *testing.T) {
	t.Parallel()
	claude, _ := stubClaude(t, executor.TestedCLINewest)
	gh := githubtest.NewServer(t)
	gh.RequireToken("ghp_right")
	dir := doctorDir(t, claude, githubConfig(gh.URL()))
	code, out, _ := inDir(t, dir, map[string]string{"GH_TOKEN": "ghp_wrong"}, "", "doctor")
	if code != exitFailed || !strings.Contains(out, "surfaces.github.token is refused (401 Bad credentials)") {
		t.Errorf("exit %d:\n%s", code, out)
	}

	// A webhook secret without a webhook, then with one.
	gh.SetTokenScopes("repo")
	gh.SetPermission("orchestrator-bot", "admin")
	more := strings.Replace(githubConfig(gh.URL()), "    token:", "    webhook_secret: s3cret\n    token:", 1)
	dir = doctorDir(t, claude, more)
	env := map[string]string{"GH_TOKEN": "ghp_right"}
	code, out, _ = inDir(t, dir, env, "", "doctor")
	if code != exitFailed || !strings.Contains(out, "no active webhook of acme/app sends issue_comment events") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	gh.AddHook("acme/app", "https://orchestrator.example.com/github/webhook", "issue_comment", "issues")
	code, out, _ = inDir(t, dir, env, "", "doctor")
	if code != 0 || !strings.Contains(out, "ok       github webhook: acme/app sends issue_comment events") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestDoctorDiscord(t *testing.T) {
	t.Parallel()
	claude, _ := stubClaude(t, executor.TestedCLINewest)
	dc := discordtest.NewServer(t)
	conf := func(channel string) string {
		return fmt.Sprintf("surfaces:\n  discord:\n    enabled: true\n    api_url: %q\n    channel_id: %q\n    allow_users: [\"42\"]\n    token: ${DC}\n", dc.URL, channel)
	}
	env := map[string]string{"DC": dc.Token()}
	code, out, _ := inDir(t, doctorDir(t, claude, conf("999")), env, "", "doctor")
	if code != exitFailed || !strings.Contains(out, "cannot see the channel 999") {
		t.Errorf("unknown channel: exit %d:\n%s", code, out)
	}
	code, out, _ = inDir(t, doctorDir(t, claude, conf(discordtest.ChannelID)), map[string]string{"DC": "wrong"}, "", "doctor")
	if code != exitFailed || !strings.Contains(out, "surfaces.discord.token is refused") {
		t.Errorf("wrong token: exit %d:\n%s", code, out)
	}
	dir := doctorDir(t, claude, conf(discordtest.ChannelID))
	code, out, _ = inDir(t, dir, env, "", "doctor")
	if code != 0 || !strings.Contains(out, "ok       discord: the bot orchestrator-bot can see and post in the channel "+discordtest.ChannelID) {
		t.Errorf("exit %d:\n%s", code, out)
	}
	// The bot's role may view the channel but not post in it.
	dc.SetEveryonePermissions(1 << 10) // View Channel
	code, out, _ = inDir(t, dir, env, "", "doctor")
	if code != exitFailed || !strings.Contains(out, "lacks Send Messages, Read Message History, Create Public Threads, Send Messages in Threads in the channel") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestDoctorCLIMissing(t *testing.T) {
	t.Parallel()
	dir := doctorDir(t, filepath.Join(t.TempDir(), "no-claude"), "")
	code, out, _ := inDir(t, dir, nil, "", "doctor")
	if code != exitFailed || !strings.Contains(out, "is not found") || !strings.Contains(out, executor.TestedCLINewest) {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// TestCLIVersionCheckedOncePerBinary: every run checks the CLI's version,
// but a binary once: again only when it changes. Outside the tested range
// it is a warning naming the tested versions.
func TestCLIVersionCheckedOncePerBinary(t *testing.T) {
	t.Parallel()
	claude, calls := stubClaude(t, "1.0.0")
	var log bytes.Buffer
	m := &Main{Config: config.Config{StateDir: t.TempDir()}, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	c := executor.Config{Command: claude}
	m.checkCLIVersion(c)
	m.checkCLIVersion(c)
	if n := countCalls(t, calls); n != 1 {
		t.Errorf("--version ran %d times for one binary, want 1", n)
	}
	if got := log.String(); strings.Count(got, "not tested") != 2 || !strings.Contains(got, executor.TestedCLIRange()) || !strings.Contains(got, "version=1.0.0") {
		t.Errorf("log:\n%s", got)
	}
	// The binary changes (an upgrade): checked again.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(claude, later, later); err != nil {
		t.Fatal(err)
	}
	m.checkCLIVersion(c)
	if n := countCalls(t, calls); n != 2 {
		t.Errorf("--version ran %d times after the binary changed, want 2", n)
	}
	// A tested version: no warning.
	ok, _ := stubClaude(t, executor.TestedCLIOldest)
	log.Reset()
	m.checkCLIVersion(executor.Config{Command: ok})
	if log.Len() != 0 {
		t.Errorf("a tested CLI warns: %s", log.String())
	}
}

// TestDoctorGitHubApp: an App's installation is checked by its permissions
// (GET /app/installations/{id}), each one missing named.
func TestDoctorGitHubApp(t *testing.T) {
	t.Parallel()
	claude, _ := stubClaude(t, executor.TestedCLIOldest)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pemFile := filepath.Join(dir, "app.pem")
	if err := os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	gh := githubtest.NewServer(t)
	gh.AddApp(12, 34, &key.PublicKey)
	gh.SetAppPermissions(34, map[string]string{"issues": "write", "contents": "read", "metadata": "read"})
	conf := fmt.Sprintf("surfaces:\n  github:\n    enabled: true\n    base_url: %q\n    repo: acme/app\n    app:\n      id: 12\n      installation_id: 34\n      private_key_file: %q\n"+
		"git:\n  enabled: true\n  pull_request:\n    enabled: true\n", gh.URL(), pemFile)
	d := doctorDir(t, claude, conf)
	code, out, _ := inDir(t, d, nil, "", "doctor")
	if code != exitFailed || !strings.Contains(out, "installation 34 has pull_requests: none") || !strings.Contains(out, "has contents: read") ||
		strings.Contains(out, "has issues:") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	gh.SetAppPermissions(34, map[string]string{"issues": "write", "contents": "write", "pull_requests": "write", "metadata": "read"})
	code, out, _ = inDir(t, d, nil, "", "doctor")
	if code != 0 || !strings.Contains(out, "ok       github: the app 12 (installation 34)") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// TestRunWarnsOfAnUntestedCLIOnce: a run checks the agent CLI's version and
// warns, naming the tested versions, when it is outside them; the next run
// of the same binary does not ask it again (the warning stays).
func TestRunWarnsOfAnUntestedCLIOnce(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	claude := clitest.Claude(t)
	dir := t.TempDir()
	wrapper, calls := filepath.Join(dir, "claude"), filepath.Join(dir, "calls")
	body := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = --version ]; then echo x >> '%s'; echo '2.0.1 (Claude Code)'; exit 0; fi\nexec '%s' \"$@\"\n", calls, claude)
	if err := os.WriteFile(wrapper, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	e.base = strings.Replace(e.base, fmt.Sprintf("command: %q", claude), fmt.Sprintf("command: %q", wrapper), 1)
	e.writeConfig("")
	for i := range 2 {
		code, _, errs := e.run("2\n", "run", "--prompt", "Implement spec X")
		if code != 0 {
			t.Fatalf("run %d: exit %d", i+1, code)
		}
		if !strings.Contains(errs, "agent CLI version is not tested") || !strings.Contains(errs, executor.TestedCLIRange()) || !strings.Contains(errs, "version=2.0.1") {
			t.Errorf("run %d: no warning naming the tested versions:\n%s", i+1, errs)
		}
	}
	if n := countCalls(t, calls); n != 1 {
		t.Errorf("--version ran %d times over two runs of one binary, want 1", n)
	}
}
