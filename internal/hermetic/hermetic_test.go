package hermetic

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// machinePath matches absolute paths that belong to one machine (a home
// directory, a work folder): no build file names one. (Go tests do use
// made-up ones, such as a $HOME of "/home/u", which they never read.)
var machinePath = regexp.MustCompile(`(^|[\s"'=:(])/(home|Users|root|work)/[A-Za-z0-9._-]`)

// moduleRoot is the directory of go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// outside reports whether rel, taken from dir, leaves root.
func outside(root, dir, rel string) bool {
	if filepath.IsAbs(rel) {
		return false // checked by machinePath
	}
	p, err := filepath.Rel(root, filepath.Join(dir, rel))
	return err != nil || p == ".." || strings.HasPrefix(p, ".."+string(filepath.Separator))
}

// pathLike reports whether a string literal looks like a relative path that
// climbs: "..", "../x", "a/../b", without white space or quotes.
func pathLike(s string) bool {
	if strings.ContainsAny(s, " \t\n\"") { // prose or code, not a path
		return false
	}
	return s == ".." || strings.HasPrefix(s, "../") || strings.Contains(s, "/../") || strings.HasSuffix(s, "/..")
}

// TestNothingReadsOutsideTheRepository parses every Go file of the module
// (tests too) and fails on a string literal, or a filepath.Join / path.Join
// of literals, that resolves (from the file's directory, where tests run)
// above the module root. go.mod, the Makefile and .ci/run are checked for
// "../" and absolute paths of a machine.
func TestNothingReadsOutsideTheRepository(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var files int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("%v", err)
			return nil
		}
		checkGoFile(func(msg string) { t.Error(msg) }, fset, root, filepath.Dir(path), f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("only %d Go files found under %s", files, root)
	}
	for _, name := range []string{"go.mod", "Makefile", filepath.Join(".ci", "run")} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "#")
			if name == "go.mod" {
				code, _, _ = strings.Cut(line, "//")
			}
			if strings.Contains(code, "../") || machinePath.MatchString(code) {
				t.Errorf("%s:%d: a path outside the repository: %s", name, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// checkGoFile reports each path of f that leaves root; dir is f's
// directory.
func checkGoFile(errorf func(string), fset *token.FileSet, root, dir string, f *ast.File) {
	report := func(n ast.Node, what string) {
		errorf(fset.Position(n.Pos()).String() + ": " + what)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			sel, ok := x.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Join" {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || (pkg.Name != "filepath" && pkg.Name != "path") {
				return true
			}
			// The leading literal arguments: what is known of the path.
			var parts []string
			for _, a := range x.Args {
				s, ok := literal(a)
				if !ok {
					break
				}
				parts = append(parts, s)
			}
			if len(parts) > 0 && outside(root, dir, filepath.Join(parts...)) {
				report(x, "joins a path outside the repository: "+filepath.Join(parts...))
			}
		case *ast.BasicLit:
			s, ok := literal(x)
			if !ok {
				return true
			}
			if pathLike(s) && outside(root, dir, s) {
				report(x, "a path outside the repository: "+strconv.Quote(s))
			}
		}
		return true
	})
}

func literal(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// TestTheCheckFindsAClimb: the checks see a path that leaves the module,
// written each way they look for.
func TestTheCheckFindsAClimb(t *testing.T) {
	root := moduleRoot(t)
	dir := filepath.Join(root, "cmd", "orchestrator")
	src := `package x
import "path/filepath"
const a = "../../../beside/fixtures"
var b = filepath.Join("..", "..", "..", "beside", name)
var c = "a/../../../../../up"
var ok1 = filepath.Join("..", "..", "executor", "testdata")
var ok2 = "waiting..."
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	checkGoFile(func(msg string) { found = append(found, msg) }, fset, root, dir, f)
	if len(found) != 3 {
		t.Fatalf("found %d problems, want 3: %q", len(found), found)
	}
}
