package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/specs"
)

func TestCheckSpecsAgainstConfig(t *testing.T) {
	t.Parallel()
	cfg := config.DefaultEnv(os.LookupEnv)
	cfg.Surfaces.Terminal.Enabled = true
	cfg.Surfaces.GitHub.Enabled = false
	for _, tc := range []struct {
		name string
		spec specs.Spec
		want []string // substrings, one per problem; none for a good spec
	}{
		{"default surfaces", specs.Spec{Name: "a"}, nil},
		{"enabled surface", specs.Spec{Name: "b", Surfaces: []specs.SurfaceRef{{Name: "terminal"}}}, nil},
		{"disabled surface", specs.Spec{Name: "c", Surfaces: []specs.SurfaceRef{{Name: "github"}}},
			[]string{"surfaces: asks on github, which is not enabled"}},
		{"escalation without reminders", specs.Spec{Name: "d", EscalateTo: "terminal"},
			[]string{"escalate_to: escalation happens when a reminder goes unanswered"}},
		{"escalation to a disabled surface", specs.Spec{Name: "e", EscalateTo: "discord", RemindEvery: time.Hour},
			[]string{"escalate_to: escalates to discord, which is not enabled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Path = tc.name + ".md"
			got := checkSpecsAgainst(cfg, []specs.Spec{tc.spec})
			if len(got) != len(tc.want) {
				t.Fatalf("problems = %v, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i].Error(), w) || !strings.HasPrefix(got[i].Error(), tc.spec.Path) {
					t.Errorf("problem %q, want it to name the file and contain %q", got[i], w)
				}
			}
		})
	}
	none := config.DefaultEnv(os.LookupEnv)
	none.Surfaces.Terminal.Enabled = false
	if got := checkSpecsAgainst(none, []specs.Spec{{Name: "f", Path: "f.md"}}); len(got) != 1 || !strings.Contains(got[0].Error(), "nobody could answer") {
		t.Fatalf("no surface at all: %v", got)
	}
}

// TestValidateReportsEveryProblem: a spec file full of mistakes is
// reported in full by `validate`, each problem with its file and line.
func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mixed, err := os.ReadFile(filepath.Join("..", "..", "specs", "testdata", "mixed-errors.md"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "specs"), 0o700)
	if err := os.WriteFile(filepath.Join(dir, "specs", "mixed.md"), mixed, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb, Dir: dir, LookupEnv: func(string) (string, bool) { return "", false }}
	if code := m.Exec(context.Background(), []string{"validate"}); code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	lines := 0
	for _, l := range strings.Split(errb.String(), "\n") {
		if strings.Contains(l, "mixed.md:") {
			lines++
		}
	}
	if lines < 15 {
		t.Fatalf("%d problems reported with file and line, want every one (≥ 15):\n%s", lines, errb.String())
	}
	for _, want := range []string{"mixed.md:3: schedule", "mixed.md:6: surfaces", "permission_mode", "escalate_to", "retries"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
}
