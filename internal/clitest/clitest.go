// Package clitest helps tests run the real Claude Code CLI offline, against
// the fake Messages API of package fakeapi.
//
// Tests find the CLI through the ORCHESTRATOR_TEST_CLAUDE environment
// variable, which `make test` sets after installing the pinned CLI.
package clitest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
)

// EnvVar names the environment variable that holds the CLI's path.
const EnvVar = "ORCHESTRATOR_TEST_CLAUDE"

// Claude returns the path of the real CLI, from ORCHESTRATOR_TEST_CLAUDE.
// When that is unset or not an executable file, it skips the test, or fails
// it when the CI variable is set: CI must never skip these tests silently.
func Claude(t testing.TB) string {
	t.Helper()
	path := os.Getenv(EnvVar)
	problem := ""
	switch fi, err := os.Stat(path); {
	case path == "":
		problem = EnvVar + " is not set"
	case err != nil:
		problem = EnvVar + ": " + err.Error()
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		problem = EnvVar + "=" + path + " is not an executable file"
	}
	if problem == "" {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("real Claude CLI needed on CI: %s (`make test` installs it and sets %s)", problem, EnvVar)
		return ""
	}
	t.Skipf("real Claude CLI not available: %s; `make test` installs it and sets %s", problem, EnvVar)
	return ""
}

// Env returns the offline environment of a CLI run against the fake API at
// baseURL (see fakeapi.OfflineEnv), with a fresh HOME under t.TempDir().
// Runs that must share a session (--resume) must share this environment.
func Env(t testing.TB, baseURL string) map[string]string {
	t.Helper()
	return fakeapi.OfflineEnv(baseURL, t.TempDir())
}

// Cmd returns a command that runs the real CLI with args against the fake
// API at baseURL, in a fresh offline environment (see Env and Command).
func Cmd(t testing.TB, baseURL string, args ...string) *exec.Cmd {
	t.Helper()
	return Command(t, Env(t, baseURL), args...)
}

// Command returns a command that runs the real CLI with args and exactly
// the environment env plus the parent's PATH, TMPDIR and locale variables.
// Its working directory is the folder "project" in env's HOME (created), so
// that runs sharing env share a working directory too. Stdin is empty (the
// CLI would otherwise wait for it); put the prompt after "--" in args. The
// command is killed when the test ends.
func Command(t testing.TB, env map[string]string, args ...string) *exec.Cmd {
	t.Helper()
	claude := Claude(t)
	// The parent's variables a child CLI keeps: what it needs to find
	// programs, write temporary files and handle text. Nothing else of the
	// parent reaches it (CLAUDECODE and CLAUDE_CODE_ENTRYPOINT in particular,
	// with which it refuses to start).
	passThrough := []string{"PATH", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "TZ"}
	merged := make(map[string]string, len(env)+len(passThrough))
	for _, k := range passThrough {
		if v, ok := os.LookupEnv(k); ok {
			merged[k] = v
		}
	}
	for k, v := range env {
		merged[k] = v
	}
	list := make([]string, 0, len(merged))
	for k, v := range merged {
		list = append(list, k+"="+v)
	}
	sort.Strings(list)

	cmd := exec.CommandContext(t.Context(), claude, args...)
	cmd.Env = list
	cmd.Stdin = nil
	if home := env["HOME"]; home != "" {
		dir := filepath.Join(home, "project")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("create working directory for the CLI: %v", err)
		}
		cmd.Dir = dir
	}
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// Lines decodes the CLI's stream-json output, one JSON object per line;
// blank lines are skipped and a line that is not a JSON object fails the test.
func Lines(t testing.TB, stdout []byte) []map[string]any {
	t.Helper()
	var lines []map[string]any
	r := bufio.NewReader(bytes.NewReader(stdout))
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var m map[string]any
			if jerr := json.Unmarshal(line, &m); jerr != nil {
				t.Fatalf("stream-json line %d is not a JSON object: %v\n%s", n, jerr, line)
			}
			lines = append(lines, m)
		}
		if err != nil {
			return lines
		}
	}
}

// Result returns the last line of type "result" of the CLI's stream-json
// output, and fails the test when there is none.
func Result(t testing.TB, stdout []byte) map[string]any {
	t.Helper()
	lines := Lines(t, stdout)
	for i := len(lines) - 1; i >= 0; i-- {
		if lines[i]["type"] == "result" {
			return lines[i]
		}
	}
	t.Fatalf("no result line in the CLI's output:\n%s", stdout)
	return nil
}
