package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
)

// inDir runs the orchestrator in-process in dir with the environment env
// and stdin, as a person would there.
func inDir(t *testing.T, dir string, env map[string]string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if env == nil {
		env = map[string]string{}
	}
	if _, ok := env["HOME"]; !ok {
		env["HOME"] = filepath.Join(dir, ".home")
	}
	m := &Main{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Dir: dir,
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code := m.Exec(ctx, args)
	t.Logf("orchestrator %s → exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// TestInitThenValidateAndRehearse: in an empty directory, init with flags
// writes files that validate accepts and rehearse runs with the real CLI.
func TestInitThenValidateAndRehearse(t *testing.T) {
	t.Parallel()
	claude := clitest.Claude(t)
	dir := t.TempDir()
	code, out, _ := inDir(t, dir, nil, "", "init", "--surface", "terminal", "--no-deliver", "--agent-command", claude)
	if code != 0 {
		t.Fatalf("init: exit %d", code)
	}
	for _, f := range []string{DefaultConfigFile, filepath.Join("specs", "first-task.md")} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("init wrote no %s: %v", f, err)
		}
	}
	for _, next := range []string{"orchestrator validate", "orchestrator doctor", "orchestrator rehearse specs/first-task.md", "orchestrator run specs/first-task.md"} {
		if !strings.Contains(out, next) {
			t.Errorf("init does not suggest %q:\n%s", next, out)
		}
	}
	if code, out, _ := inDir(t, dir, nil, "", "validate"); code != 0 || !strings.Contains(out, "1 ok (first-task)") {
		t.Fatalf("validate: exit %d, %q", code, out)
	}
	code, out, _ = inDir(t, dir, nil, "1\n", "rehearse", "specs/first-task.md")
	if code != 0 {
		t.Fatalf("rehearse: exit %d", code)
	}
	if !strings.Contains(out, "Rehearsal") {
		t.Errorf("rehearse output:\n%s", out)
	}
}

// TestInitDeliverRehearses: with delivery, the rehearse command init
// suggests runs in the git checkout init was run in.
func TestInitDeliverRehearses(t *testing.T) {
	t.Parallel()
	claude := clitest.Claude(t)
	git := clitest.Git(t)
	dir := t.TempDir()
	code, out, _ := inDir(t, dir, nil, "", "init", "--surface", "terminal", "--deliver", "--agent-command", claude)
	if code != 0 {
		t.Fatalf("init: exit %d", code)
	}
	for _, args := range [][]string{{"init", "-q", "."}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init"}} {
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, b)
		}
	}
	var rehearse []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "orchestrator" && f[1] == "rehearse" {
			rehearse = f[1:slices.Index(f, "#")]
		}
	}
	if len(rehearse) == 0 {
		t.Fatalf("init suggests no rehearse:\n%s", out)
	}
	if code, _, _ := inDir(t, dir, nil, "1\n", rehearse...); code != 0 {
		t.Fatalf("%v: exit %d", rehearse, code)
	}
}

// TestInitNeverOverwrites: an existing file is kept unless --force, and the
// refusal names it with exit 2.
func TestInitNeverOverwrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mine := filepath.Join(dir, DefaultConfigFile)
	if err := os.WriteFile(mine, []byte("# mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := inDir(t, dir, nil, "", "init", "--surface", "terminal")
	if code != exitUsage || !strings.Contains(errs, mine) || !strings.Contains(errs, "--force") {
		t.Fatalf("exit %d, stderr %q: want %d naming %s and --force", code, errs, exitUsage, mine)
	}
	if b, _ := os.ReadFile(mine); string(b) != "# mine\n" {
		t.Fatalf("the file was changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "specs")); err == nil {
		t.Error("a refused init wrote the spec")
	}
	if code, _, _ := inDir(t, dir, nil, "", "init", "--surface", "terminal", "--force"); code != 0 {
		t.Fatalf("--force: exit %d", code)
	}
	if b, _ := os.ReadFile(mine); string(b) == "# mine\n" {
		t.Fatal("--force kept the old file")
	}
}

// TestInitGitHubAndDelivery: the token is referenced as ${VAR}, never
// written; the file validates once the variable is set.
func TestInitGitHubAndDelivery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sub := filepath.Join(dir, "proj")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MY_GH": "ghp_never_written_1234"}
	code, out, _ := inDir(t, dir, env, "", "init", "--dir", "proj", "--surface", "github,terminal", "--repo", "acme/app",
		"--github-token-env", "MY_GH", "--deliver", "--name", "tidy-up")
	if code != 0 {
		t.Fatalf("init: exit %d", code)
	}
	cfg, err := os.ReadFile(filepath.Join(sub, DefaultConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"token: ${MY_GH}", "repo: acme/app", "pull_request:\n    enabled: true", "git:\n  enabled: true"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(string(cfg), "ghp_") || strings.Contains(out, "ghp_") {
		t.Error("the token's value was written")
	}
	if !strings.Contains(out, "cd proj") || !strings.Contains(out, "export MY_GH=") {
		t.Errorf("next commands:\n%s", out)
	}
	spec, _ := os.ReadFile(filepath.Join(sub, "specs", "tidy-up.md"))
	if !strings.Contains(string(spec), "surfaces: [github, terminal]") {
		t.Errorf("spec:\n%s", spec)
	}
	if code, _, _ := inDir(t, sub, env, "", "validate"); code != 0 {
		t.Fatalf("validate: exit %d", code)
	}
	// Without the variable, validate names it.
	if code, _, errs := inDir(t, sub, nil, "", "validate"); code != exitUsage || !strings.Contains(errs, "MY_GH") {
		t.Fatalf("validate without MY_GH: exit %d, %q", code, errs)
	}
}

func TestInitUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--surface", "github"},
		{"--surface", "slack"},
		{"--surface", "discord", "--discord-channel", "general"},
		{"--repo", "noslash"},
		{"--surface", "github", "--repo", "a/b", "--github-token-env", "ghp_abc-def"},
		{"--name", "Bad Name"},
		{"--deliver", "--no-deliver"},
		{"--dir", "missing"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			code, _, errs := inDir(t, dir, nil, "", append([]string{"init"}, args...)...)
			if code != exitUsage || !strings.Contains(errs, "--") {
				t.Errorf("exit %d, stderr %q: want %d naming the flag", code, errs, exitUsage)
			}
			if _, err := os.Stat(filepath.Join(dir, DefaultConfigFile)); err == nil {
				t.Error("a refused init wrote the config")
			}
		})
	}
}

// TestInitFlagsListed: every flag of init is in initFlags, so that giving
// it means nothing is asked.
func TestInitFlagsListed(t *testing.T) {
	t.Parallel()
	cmd := (&Main{}).newInitCmd()
	for _, m := range regexp.MustCompile(`--([a-z-]+)`).FindAllStringSubmatch(cmd.LocalFlags().FlagUsages(), -1) {
		if !slices.Contains(initFlags, m[1]) && m[1] != "help" {
			t.Errorf("--%s is not in initFlags", m[1])
		}
	}
}

// TestAskInit: at a terminal init asks, with defaults and a second chance
// after a wrong answer.
func TestAskInit(t *testing.T) {
	t.Parallel()
	in := "slack\ngithub, discord\ny\nacme\nacme/app\nGH_TOKEN\n\n123456789\n"
	o := initOptions{githubTokenEnv: "GITHUB_TOKEN", discordTokenEnv: "DISCORD_TOKEN", name: "first-task"}
	var out bytes.Buffer
	if err := askInit(bufio.NewReader(strings.NewReader(in)), &out, &o); err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.surfaces, ",") != "github,discord" || !o.deliver || o.repo != "acme/app" ||
		o.githubTokenEnv != "GH_TOKEN" || o.discordTokenEnv != "DISCORD_TOKEN" || o.discordChannel != "123456789" {
		t.Fatalf("options = %+v", o)
	}
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "want ") != 2 {
		t.Errorf("wrong answers are not asked again:\n%s", out.String())
	}
	// Stdin closed before an answer: an error saying to use flags.
	o = initOptions{}
	if err := askInit(bufio.NewReader(strings.NewReader("")), &out, &o); err == nil || !strings.Contains(err.Error(), "flags") {
		t.Fatalf("err = %v", err)
	}
}
