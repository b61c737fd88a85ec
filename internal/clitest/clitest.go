// Package clitest helps tests run the real Claude Code CLI offline, against
// the fake Messages API of package fakeapi.
//
// Tests find the CLI through the ORCHESTRATOR_TEST_CLAUDE environment
// variable, which `make test` sets after installing the pinned CLI.
//
// One rule for the real tools a test needs (the Claude CLI, git): when one
// is missing the test fails, saying how to install it. It never skips: a
// suite that passes because it ran nothing proves nothing.
package clitest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
)

// EnvVar names the environment variable that holds the CLI's path.
const EnvVar = "ORCHESTRATOR_TEST_CLAUDE"

// Install says how to get the pinned CLI a test needs.
const Install = "`make claude` installs the pinned CLI (" + Version + ") under the cache folder " +
	"($XDG_CACHE_HOME or ~/.cache)/orchestrator/claude-code-" + Version + "/node_modules/.bin/claude; " +
	"set " + EnvVar + " to that path (`make test` does both)"

// Version is the Claude Code CLI the tests are recorded against (the
// Makefile's CLAUDE_VERSION).
const Version = "2.1.330"

// Claude returns the path of the real CLI, from ORCHESTRATOR_TEST_CLAUDE.
// When that is unset or not an executable file, the test fails saying how
// to install it.
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
	t.Fatalf("this test needs the real Claude Code CLI: %s; %s", problem, Install)
	return ""
}

// Git returns the path of git; when git is missing the test fails saying
// how to install it.
func Git(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("this test needs git: %v; install it (Debian: apt-get install git)", err)
	}
	return path
}

// GitHTTPBackend returns the path of git-http-backend, the CGI program of
// git that serves repositories over HTTP; when it is missing the test fails
// saying how to install it.
func GitHTTPBackend(t testing.TB) string {
	t.Helper()
	exe, err := exec.Command(Git(t), "--exec-path").Output()
	if err != nil {
		t.Fatalf("this test needs git-http-backend: git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(exe)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("this test needs git-http-backend, part of git: %v; install git with it (Debian: apt-get install git)", err)
	}
	return backend
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
