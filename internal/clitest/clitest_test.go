package clitest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recorder is a testing.TB that records Skipf and Fatalf instead of ending
// the test, so that Claude's decisions can be checked.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Skipf(format string, args ...any)  { r.skipped = fmt.Sprintf(format, args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestClaude(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExe := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(notExe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		path, ci  string
		wantPath  string
		wantSkip  bool
		wantFatal bool
	}{
		{name: "found", path: exe, wantPath: exe},
		{name: "found on CI", path: exe, ci: "true", wantPath: exe},
		// A missing CLI fails the test, on CI or not: never a skip.
		{name: "unset", wantFatal: true},
		{name: "missing", path: filepath.Join(t.TempDir(), "nope"), wantFatal: true},
		{name: "not executable", path: notExe, wantFatal: true},
		{name: "directory", path: t.TempDir(), wantFatal: true},
		{name: "unset on CI", ci: "1", wantFatal: true},
		{name: "missing on CI", path: notExe, ci: "1", wantFatal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvVar, tt.path)
			t.Setenv("CI", tt.ci)
			r := &recorder{TB: t}
			got := Claude(r)
			if got != tt.wantPath || (r.skipped != "") != tt.wantSkip || (r.failed != "") != tt.wantFatal {
				t.Errorf("Claude = %q, skipped %q, failed %q; want %q, skip %v, fatal %v", got, r.skipped, r.failed, tt.wantPath, tt.wantSkip, tt.wantFatal)
			}
			if msg := r.skipped + r.failed; msg != "" && (!strings.Contains(msg, "make claude") || !strings.Contains(msg, EnvVar)) {
				t.Errorf("message %q does not say how to install the CLI (`make claude`) and where to point %s", msg, EnvVar)
			}
		})
	}
}

func TestCommand(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvVar, exe)
	t.Setenv("CLAUDECODE", "1")
	t.Setenv("CLAUDE_CODE_ENTRYPOINT", "cli")
	t.Setenv("GITHUB_TOKEN", "secret")

	env := Env(t, "http://127.0.0.1:9")
	cmd := Command(t, env, "-p", "--", "hi")
	if cmd.Path != exe || !slices.Equal(cmd.Args[1:], []string{"-p", "--", "hi"}) {
		t.Errorf("command = %s %q", cmd.Path, cmd.Args)
	}
	if cmd.Stdin != nil {
		t.Error("stdin is set, want none")
	}
	if fi, err := os.Stat(cmd.Dir); err != nil || !fi.IsDir() || !strings.HasPrefix(cmd.Dir, env["HOME"]) {
		t.Errorf("working directory %q (%v) is not a folder in HOME %q", cmd.Dir, err, env["HOME"])
	}
	want := []string{
		"HOME=" + env["HOME"], "ANTHROPIC_BASE_URL=http://127.0.0.1:9", "ANTHROPIC_API_KEY=fake-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_MAX_RETRIES=0", "PATH=" + os.Getenv("PATH"),
	}
	for _, kv := range want {
		if !slices.Contains(cmd.Env, kv) {
			t.Errorf("env lacks %s", kv)
		}
	}
	for _, kv := range cmd.Env {
		for _, bad := range []string{"CLAUDECODE=", "CLAUDE_CODE_ENTRYPOINT=", "GITHUB_TOKEN="} {
			if strings.HasPrefix(kv, bad) {
				t.Errorf("env passes the parent's %s", kv)
			}
		}
	}
	// Runs sharing an environment share a working directory; Cmd makes a new one.
	if again := Command(t, env, "x"); again.Dir != cmd.Dir {
		t.Errorf("second command runs in %q, want %q", again.Dir, cmd.Dir)
	}
	if other := Cmd(t, "http://127.0.0.1:9"); other.Dir == cmd.Dir {
		t.Error("Cmd reused another run's home")
	}
}

func TestLinesAndResult(t *testing.T) {
	t.Parallel()
	out := []byte(`{"type":"system","subtype":"init"}

{"type":"assistant"}
{"subtype":"success","type":"result","result":"first"}
{"type":"result","result":"last"}`)
	lines := Lines(t, out)
	if len(lines) != 4 || lines[0]["subtype"] != "init" {
		t.Errorf("Lines = %v", lines)
	}
	if res := Result(t, out); res["result"] != "last" {
		t.Errorf("Result = %v, want the last result line", res)
	}
}
