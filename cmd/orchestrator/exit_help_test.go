package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
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
