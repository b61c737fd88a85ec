package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateAgentCommandNotFound: an agent.command set in the file that
// runs would not find is a problem at its key, file and line; a path that
// is not executable too.
func TestValidateAgentCommandNotFound(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	tm.write(t, DefaultConfigFile, "log: {level: info}\nagent:\n  command: no-such-agent-cli-h10\n")
	if code := tm.exec("validate"); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, tm.stderr.String())
	}
	want := `orchestrator.yaml:3: agent.command: the agent CLI is not found: "no-such-agent-cli-h10" not in PATH`
	if !strings.Contains(tm.stderr.String(), want) || strings.Contains(tm.stdout.String(), "ok") {
		t.Errorf("stdout %q\nstderr %q\nwant %q", tm.stdout.String(), tm.stderr.String(), want)
	}

	tm = newTestMain(t)
	tm.write(t, "notes.txt", "not a program")
	tm.write(t, DefaultConfigFile, "agent:\n  command: ./notes.txt\n")
	if code := tm.exec("validate"); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, tm.stderr.String())
	}
	if want := "orchestrator.yaml:2: agent.command: the agent CLI is not found: " + filepath.Join(tm.Dir, "notes.txt") + " is not an executable file"; !strings.Contains(tm.stderr.String(), want) {
		t.Errorf("stderr %q\nwant %q", tm.stderr.String(), want)
	}
}

// TestValidateAgentCommandFound: a path to an executable, relative to the
// working directory or absolute, is found.
func TestValidateAgentCommandFound(t *testing.T) {
	t.Parallel()
	for _, command := range []string{"bin/agent", "ABS"} {
		tm := newTestMain(t)
		exe := tm.write(t, "bin/agent", "#!/bin/sh\n")
		if err := os.Chmod(exe, 0o755); err != nil {
			t.Fatal(err)
		}
		if command == "ABS" {
			command = exe
		}
		tm.write(t, DefaultConfigFile, "agent:\n  command: "+command+"\n")
		if code := tm.exec("validate"); code != 0 || !strings.Contains(tm.stdout.String(), "orchestrator.yaml: ok") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", command, code, tm.stdout.String(), tm.stderr.String())
		}
	}
}

// TestValidateDefaultAgentCommandNotFoundWarns: the default command not on
// PATH is a warning, not a problem: validate passes where the CLI is not
// installed.
func TestValidateDefaultAgentCommandNotFoundWarns(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	tm.write(t, DefaultConfigFile, "agent:\n  env: {PATH: "+filepath.Join(tm.Dir, "empty")+"}\n")
	if code := tm.exec("validate"); code != 0 {
		t.Fatalf("exit %d, stderr %s", code, tm.stderr.String())
	}
	if want := `warning: agent.command (default "claude"): the agent CLI is not found`; !strings.Contains(tm.stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", tm.stderr.String(), want)
	}
}

// TestValidateSpecKeysDidYouMean: a misspelt key of a spec, at the top or
// in a section, gets a "did you mean" as the configuration's keys do.
func TestValidateSpecKeysDidYouMean(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	tm.write(t, "specs/s.md", "---\nmodle: sonnet\ngit:\n  brnach: bot/{run}\n---\nT\n")
	if code := tm.exec("validate"); code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	for _, want := range []string{
		`s.md:2: modle: unknown key (did you mean "model"?)`,
		`s.md:4: git.brnach: unknown key (did you mean "branch"?)`,
	} {
		if !strings.Contains(tm.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, tm.stderr.String())
		}
	}
}
