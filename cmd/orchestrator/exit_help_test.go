package main

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestHelpListsEveryExitCode: --help lists every exit code exit.go
// declares (each exit… constant), with what it means.
func TestHelpListsEveryExitCode(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "exit.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			v := sp.(*ast.ValueSpec)
			for i, n := range v.Names {
				if lit, ok := v.Values[i].(*ast.BasicLit); ok && strings.HasPrefix(n.Name, "exit") {
					codes = append(codes, lit.Value)
				}
			}
		}
	}
	if len(codes) < 6 {
		t.Fatalf("found the exit codes %v in exit.go, want at least 6", codes)
	}
	tm := newTestMain(t)
	if code := tm.exec("--help"); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, c := range codes {
		var n int
		fmt.Sscan(c, &n)
		if !strings.Contains(tm.stdout.String(), fmt.Sprintf("\n  %3d  ", n)) {
			t.Errorf("--help does not list exit code %s:\n%s", c, tm.stdout.String())
		}
	}
}

// TestRunMissingWorkdirExitsTwoBeforeARun: run --workdir naming no
// directory (or a spec whose workdir is none) is a usage error, exit 2,
// said by name, and no run is made.
func TestRunMissingWorkdirExitsTwoBeforeARun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args func(tm *testMain) []string
		want string
	}{
		{"flag", func(tm *testMain) []string {
			return []string{"run", "--workdir", filepath.Join(tm.Dir, "missing"), "--prompt", "hi"}
		}, "--workdir " + "MISSING" + ": it does not exist"},
		{"spec", func(tm *testMain) []string {
			return []string{"run", tm.write(t, "s.md", "---\nname: s\nworkdir: ./missing\n---\nDo it\n")}
		}, "workdir MISSING (the spec's workdir, else agent.workdir): it does not exist"},
		{"a file", func(tm *testMain) []string {
			return []string{"run", "--workdir", tm.write(t, "missing", "not a directory\n"), "--prompt", "hi"}
		}, "--workdir MISSING: it is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tm := newTestMain(t)
			state := filepath.Join(tm.Dir, "state")
			tm.write(t, DefaultConfigFile, fmt.Sprintf("state_dir: %q\n", state))
			if code := tm.exec(tc.args(tm)...); code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, tm.stderr.String())
			}
			got := strings.ReplaceAll(tm.stderr.String(), filepath.Join(tm.Dir, "missing"), "MISSING")
			if !strings.Contains(got, tc.want) {
				t.Errorf("stderr = %q, want %q", got, tc.want)
			}
			if _, err := os.Stat(filepath.Join(state, store.FileName)); err == nil {
				st := openTestStore(t, state)
				if runs, err := st.ListRuns(context.Background(), store.RunFilter{}); err != nil || len(runs) != 0 {
					t.Errorf("runs made: %v, %v", runs, err)
				}
			}
		})
	}
}
