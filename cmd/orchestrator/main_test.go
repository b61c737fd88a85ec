package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
)

// TestMain lets scripts run "orchestrator" as a command: testscript
// re-executes this test binary, which then runs main's run.
func TestMain(m *testing.M) {
	defaultHookCommand = testHookCommand()
	// The crash tests run this test binary as the orchestrator process.
	if os.Getenv(envChild) == "1" {
		child := NewMain()
		child.failpoint = failpointFromEnv(child)
		os.Exit(run(child))
	}
	testscript.Main(stopPostgresAfter{m}, map[string]func(){
		"orchestrator": func() { os.Exit(run(NewMain())) },
	})
}

// stopPostgresAfter runs the tests, then stops the PostgreSQL cluster
// some of them started (internal/pgtest).
type stopPostgresAfter struct{ m *testing.M }

func (s stopPostgresAfter) Run() int {
	code := s.m.Run()
	pgtest.StopShared()
	return code
}

// testHookCommand runs this test binary as the orchestrator for the agent
// CLI's hook (the CLI's environment does not pass ORCHESTRATOR_*).
func testHookCommand() string { return envChild + "=1 " + shQuote(os.Args[0]) }

// TestScripts runs the CLI scripts in testdata/script.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			home := filepath.Join(env.WorkDir, "home")
			env.Setenv("HOME", home)
			env.Setenv("XDG_STATE_HOME", filepath.Join(home, ".local", "state"))
			return os.MkdirAll(home, 0o755)
		},
	})
}

// testMain is a Main on a temporary directory with buffers and env as its
// whole environment.
type testMain struct {
	*Main
	stdout, stderr bytes.Buffer
}

func newTestMain(t *testing.T, env ...string) *testMain {
	t.Helper()
	dir := t.TempDir()
	vars := map[string]string{"HOME": filepath.Join(dir, "home")}
	for i := 0; i+1 < len(env); i += 2 {
		vars[env[i]] = env[i+1]
	}
	tm := &testMain{}
	tm.Main = &Main{
		Stdin:     strings.NewReader(""),
		Stdout:    &tm.stdout,
		Stderr:    &tm.stderr,
		LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		Dir:       dir,
		Version:   "v1.2.3",
		Commit:    "abc1234",
	}
	return tm
}

func (tm *testMain) write(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(tm.Dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (tm *testMain) exec(args ...string) int { return tm.Exec(context.Background(), args) }

func TestVersion(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	// A broken config must not break version.
	tm.write(t, DefaultConfigFile, "nonsense: [\n")
	if code := tm.exec("version"); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, tm.stderr.String())
	}
	if got := tm.stdout.String(); !strings.HasPrefix(got, "orchestrator v1.2.3 (commit abc1234, go") {
		t.Errorf("stdout = %q", got)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bogus"},
		{"--no-such-flag", "version"},
		{"version", "extra"},
		{"validate", "--log-level"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			tm := newTestMain(t)
			if code := tm.exec(args...); code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if !strings.HasPrefix(tm.stderr.String(), "orchestrator: ") || !strings.Contains(tm.stderr.String(), "--help") {
				t.Errorf("stderr = %q", tm.stderr.String())
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{}, {"--help"}, {"help"}, {"help", "validate"}, {"validate", "-h"}} {
		tm := newTestMain(t)
		tm.write(t, DefaultConfigFile, "broken: true\n")
		if code := tm.exec(args...); code != 0 {
			t.Errorf("%q: exit %d, stderr %q", args, code, tm.stderr.String())
		}
		if !strings.Contains(tm.stdout.String(), "Usage:") {
			t.Errorf("%q: stdout = %q", args, tm.stdout.String())
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		tm := newTestMain(t)
		if code := tm.exec("validate"); code != 0 {
			t.Fatalf("exit %d, stderr %q", code, tm.stderr.String())
		}
		want := "config (defaults): ok\nspecs " + filepath.Join(tm.Dir, "specs") + ": none (no such directory)\n"
		if got := tm.stdout.String(); got != want {
			t.Errorf("stdout = %q, want %q", got, want)
		}
	})
	t.Run("ok with ./orchestrator.yaml", func(t *testing.T) {
		t.Parallel()
		tm := newTestMain(t)
		tm.write(t, DefaultConfigFile, "log: {level: debug}\nspecs: {dir: tasks}\n")
		tm.write(t, "tasks/hello.md", "---\nname: hello\n---\nSay hello.\n")
		if code := tm.exec("validate"); code != 0 {
			t.Fatalf("exit %d, stderr %q", code, tm.stderr.String())
		}
		for _, w := range []string{"orchestrator.yaml: ok", "tasks: 1 ok (hello)"} {
			if !strings.Contains(tm.stdout.String(), w) {
				t.Errorf("stdout %q lacks %q", tm.stdout.String(), w)
			}
		}
	})
	t.Run("bad config", func(t *testing.T) {
		t.Parallel()
		tm := newTestMain(t)
		tm.write(t, "bad.yaml", "log:\n  level: loud\nsurfaces:\n  github:\n    tokne: x\n")
		if code := tm.exec("validate", "--config", "bad.yaml"); code != exitUsage {
			t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, tm.stderr.String())
		}
		got := tm.stderr.String()
		want := filepath.Join(tm.Dir, "bad.yaml") + `:5: surfaces.github.tokne: unknown key (did you mean "token"?)`
		// The value problems are said too (issue 24: every problem at once).
		if !strings.Contains(got, want) || !strings.Contains(got, `:2: log.level: want one of`) || !strings.Contains(got, "orchestrator: 2 problems found") {
			t.Errorf("stderr = %q\nwant it to contain %q", got, want)
		}
	})
	t.Run("every validation problem", func(t *testing.T) {
		t.Parallel()
		tm := newTestMain(t, EnvConfig, "c.yaml")
		tm.write(t, "c.yaml", "log:\n  level: loud\nserve:\n  catch_up: all\n")
		if code := tm.exec("validate"); code != exitUsage {
			t.Fatalf("exit %d; stderr %q", code, tm.stderr.String())
		}
		for _, w := range []string{"c.yaml:2: log.level: want one of", "c.yaml:4: serve.catch_up: want one of", "2 problems found"} {
			if !strings.Contains(tm.stderr.String(), w) {
				t.Errorf("stderr %q lacks %q", tm.stderr.String(), w)
			}
		}
	})
	t.Run("bad spec", func(t *testing.T) {
		t.Parallel()
		tm := newTestMain(t)
		tm.write(t, "specs/broken.md", "no frontmatter here\n")
		if code := tm.exec("validate"); code != exitUsage {
			t.Fatalf("exit %d; stdout %q stderr %q", code, tm.stdout.String(), tm.stderr.String())
		}
		if !strings.Contains(tm.stderr.String(), "broken.md") {
			t.Errorf("stderr %q does not name the spec file", tm.stderr.String())
		}
	})
	t.Run("missing config file", func(t *testing.T) {
		t.Parallel()
		tm := newTestMain(t)
		if code := tm.exec("validate", "--config", "nope.yaml"); code != exitUsage {
			t.Fatalf("exit %d; stderr %q", code, tm.stderr.String())
		}
		if !strings.Contains(tm.stderr.String(), "nope.yaml") {
			t.Errorf("stderr = %q", tm.stderr.String())
		}
	})
	t.Run("unset variable", func(t *testing.T) {
		t.Parallel()
		tm := newTestMain(t)
		tm.write(t, DefaultConfigFile, "surfaces:\n  github:\n    token: ${GH_TOKEN_FOR_TEST}\n")
		if code := tm.exec("validate"); code != exitUsage {
			t.Fatalf("exit %d; stderr %q", code, tm.stderr.String())
		}
		if !strings.Contains(tm.stderr.String(), "orchestrator.yaml:3: surfaces.github.token: environment variable GH_TOKEN_FOR_TEST is not set") {
			t.Errorf("stderr = %q", tm.stderr.String())
		}
	})
	t.Run("log-level flag", func(t *testing.T) {
		t.Parallel()
		tm := newTestMain(t)
		if code := tm.exec("validate", "--log-level", "chatty"); code != exitUsage {
			t.Fatalf("exit %d; stderr %q", code, tm.stderr.String())
		}
		if !strings.Contains(tm.stderr.String(), `log.level: want one of debug, info, warn, error, got "chatty"`) {
			t.Errorf("stderr = %q", tm.stderr.String())
		}
	})
}

// TestLoadConfig drives the configuration loading every command but version
// and validate goes through, with a command added for the test.
func TestLoadConfig(t *testing.T) {
	t.Parallel()
	t.Run("loaded", func(t *testing.T) {
		t.Parallel()
		tm := newTestMain(t, "XDG_STATE_HOME", "/xdg")
		tm.write(t, DefaultConfigFile, "log: {format: json}\n")
		var got config.Config
		err := runWith(tm, func() error { got = tm.Config; return nil }, "--log-level", "debug")
		if err != nil {
			t.Fatal(err)
		}
		if got.Log.Level != "debug" || got.Log.Format != "json" || got.StateDir != filepath.FromSlash("/xdg/orchestrator") {
			t.Errorf("config = %+v", got.Log)
		}
		if tm.ConfigFile != filepath.Join(tm.Dir, DefaultConfigFile) {
			t.Errorf("ConfigFile = %q", tm.ConfigFile)
		}
		tm.Logger.Debug("hello")
		if !strings.Contains(tm.stderr.String(), `"msg":"hello"`) {
			t.Errorf("logger did not write json at debug: %q", tm.stderr.String())
		}
	})
	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		tm := newTestMain(t)
		tm.write(t, DefaultConfigFile, "log: {level: loud, format: xml}\n")
		called := false
		err := runWith(tm, func() error { called = true; return nil })
		if called {
			t.Error("command ran with an invalid configuration")
		}
		if code := exitCode(context.Background(), err); code != exitUsage {
			t.Errorf("exit %d, want %d (%v)", code, exitUsage, err)
		}
		want := "invalid configuration (2 problems):\n  " + filepath.Join(tm.Dir, DefaultConfigFile) + ":1: log.level"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("error %q\nwant prefix %q", err, want)
		}
	})
}

// runWith runs a "probe" command added to the tree, which calls f.
func runWith(tm *testMain, f func() error, args ...string) error {
	root := tm.newRootCmd()
	probe := &cobra.Command{Use: "probe", RunE: func(*cobra.Command, []string) error { return f() }}
	root.AddCommand(probe)
	root.SetArgs(append([]string{"probe"}, args...))
	root.SetOut(&tm.stdout)
	root.SetErr(&tm.stderr)
	return root.ExecuteContext(context.Background())
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	bg := context.Background()
	for _, tt := range []struct {
		ctx  context.Context
		err  error
		want int
	}{
		{bg, nil, 0},
		{bg, errors.New("boom"), 1},
		{bg, usageError(errors.New("bad flag")), 2},
		{bg, configError(errors.New("bad key")), 2},
		{bg, fmt.Errorf("load: %w", &config.Error{Key: "x", Err: errors.New("bad")}), 2},
		{bg, waitingError(nil), 3},
		{bg, fmt.Errorf("run: %w", context.Canceled), 130},
		{cancelled, errors.New("signal: interrupt"), 130},
		{cancelled, nil, 0},
		{bg, silentExit(1), 1},
	} {
		if got := exitCode(tt.ctx, tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestCancelled(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	ctx, cancel := context.WithCancel(context.Background())
	root := tm.newRootCmd()
	root.AddCommand(&cobra.Command{Use: "wait", RunE: func(cmd *cobra.Command, _ []string) error {
		cancel()
		<-cmd.Context().Done()
		return cmd.Context().Err()
	}})
	root.SetArgs([]string{"wait"})
	err := root.ExecuteContext(ctx)
	if code := exitCode(ctx, err); code != exitCancelled {
		t.Errorf("exit %d, want %d", code, exitCancelled)
	}
	tm.printError(err, exitCancelled)
	if got := tm.stderr.String(); got != "orchestrator: cancelled\n" {
		t.Errorf("stderr = %q", got)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	var order []int
	tm.OnClose(func() error { order = append(order, 1); return nil })
	tm.OnClose(func() error { order = append(order, 2); return errors.New("close store") })
	if code := tm.exec("version"); code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	if fmt.Sprint(order) != "[2 1]" || !strings.Contains(tm.stderr.String(), "close store") {
		t.Errorf("order %v, stderr %q", order, tm.stderr.String())
	}
}

func TestInspect(t *testing.T) {
	t.Parallel()
	marker := func(q string) string {
		return `<!--QUESTION:{\"questions\":[{\"question\":\"` + q + `\"}]}-->`
	}
	transcript := strings.Join([]string{
		`{"type":"system","subtype":"init","session_id":"s1","model":"m"}`,
		`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"sub-agent ` + marker("Ignored?") + `"}]},"parent_tool_use_id":"toolu_1","session_id":"s1"}`,
		`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Hi \u001b[31m ` + marker("Which one?") + `"}]},"parent_tool_use_id":null,"session_id":"s1"}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"done \u001b[31m red","session_id":"s1","num_turns":2}`,
	}, "\n") + "\n"

	tm := newTestMain(t)
	tm.Stdin = strings.NewReader(transcript)
	if code := tm.exec("inspect", "--json", "-"); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, tm.stderr.String())
	}
	var got inspectReport
	if err := json.Unmarshal(tm.stdout.Bytes(), &got); err != nil {
		t.Fatalf("%v in %s", err, tm.stdout.String())
	}
	if got.Outcome.SessionID != "s1" || got.Outcome.Status != "success" || len(got.Questions) != 1 || got.Questions[0].Text != "Which one?" {
		t.Errorf("got %+v", got)
	}

	tm = newTestMain(t)
	tm.write(t, "t.ndjson", transcript)
	if code := tm.exec("inspect", "t.ndjson"); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, tm.stderr.String())
	}
	out := tm.stdout.String()
	if strings.Contains(out, "\x1b") || strings.Contains(out, "Ignored") || !strings.Contains(out, "1. Which one?") {
		t.Errorf("stdout = %q", out)
	}
}
