package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateReportsEveryProblemAtOnce: a file with problems found when
// it is read (an unknown key, a wrong type) and problems of its values,
// and specs with problems: validate says all of them in one go, but none
// about a key whose value the read problem left at its default.
func TestValidateReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	tm.write(t, DefaultConfigFile, fmt.Sprintf("state_dir: %q\nagent:\n  command: %q\nlog:\n  level: loud\nserve:\n  max_concurrent_runs: abc\n  lease_ttl: 1s\nbogus: 1\n",
		filepath.Join(tm.Dir, "state"), "/bin/sh"))
	tm.write(t, "specs/a.md", "---\nname: a\nschedule: \"nope\"\n---\nT\n")
	tm.write(t, "specs/b.md", "---\nname: b\nbad_key: 1\n---\nT\n")
	if code := tm.exec("validate"); code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	got := tm.stderr.String()
	for _, want := range []string{
		"orchestrator.yaml:5: log.level: want one of",
		"orchestrator.yaml:7: serve.max_concurrent_runs: want an integer",
		"orchestrator.yaml:8: serve.lease_ttl: must be at least 3s",
		"orchestrator.yaml:9: bogus: unknown key",
		"specs/a.md:3: schedule:",
		"specs/b.md:3: bad_key: unknown key",
		"orchestrator: 6 problems found",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("validate lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "max_concurrent_runs") != 1 {
		t.Errorf("a key whose value could not be read is checked again:\n%s", got)
	}
}
