// Package internal_test checks the layering docs/design.md describes: which
// package may reach which, over the whole import graph (`go list -deps`), so
// a forbidden import anywhere below a package fails here, not in review.
package internal_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/orchestrator-dev/orchestrator"

// Prefixes of import paths a rule may forbid.
var (
	store    = module + "/internal/store"
	executor = module + "/executor"
	drivers  = []string{"modernc.org/sqlite", "github.com/jackc/pgx"}
	sdks     = []string{"github.com/google/go-github", "github.com/bwmarrin/discordgo", "github.com/slack-go/slack"}
	yaml     = []string{"gopkg.in/yaml", module + "/internal/yamlfile", module + "/internal/config"}
)

// rule forbids pkg (and every package under it, unless exact) to reach,
// directly or through others, any package under one of the forbidden
// prefixes. stdOnly forbids every package outside the standard library and
// pkg.
type rule struct {
	pkg     string
	exact   bool
	why     string
	forbid  []string
	stdOnly bool
}

func join(lists ...[]string) []string { return slices.Concat(lists...) }

// rules is the table of docs/design.md ("Layers"), executable.
func rules(surfaceDirs []string) []rule {
	rs := []rule{
		{pkg: module + "/questions", why: "questions is the vocabulary every layer shares", stdOnly: true},
		{pkg: module + "/internal/approvals", exact: true, why: "the approval rules are pure: config and specs check rules with them (the store-backed gate is approvals/gate)",
			forbid: join([]string{store, executor, module + "/internal/runner", module + "/internal/approvals/gate"}, drivers, sdks)},
		{pkg: module + "/internal/config", why: "config is read and validated without a store or a service",
			forbid: join([]string{store, executor, module + "/surfaces", module + "/internal/runner", module + "/internal/approvals/gate"}, drivers, sdks)},
		{pkg: module + "/specs", why: "specs parses and schedules; it runs nothing itself",
			forbid: join([]string{store, executor, module + "/surfaces", module + "/internal/runner", module + "/internal/approvals/gate"}, drivers, sdks)},
		{pkg: executor, why: "the executor drives the CLI and knows nothing of questions, surfaces, specs or YAML",
			forbid: join([]string{module + "/questions", module + "/surfaces", module + "/specs", store}, yaml, drivers, sdks)},
		{pkg: module + "/internal/runner", why: "the runner knows surfaces through their interface only",
			forbid: join(surfaceDirs, sdks)},
		{pkg: module + "/internal/store", why: "the store keeps state; it asks nobody and parses no config",
			forbid: join([]string{module + "/surfaces", module + "/specs", module + "/internal/runner", module + "/internal/config"}, yaml, sdks)},
	}
	// The surfaces package declares the interface and imports no surface.
	rs = append(rs, rule{pkg: module + "/surfaces", exact: true, why: "the Surface interface imports no implementation and no SDK",
		forbid: join(surfaceDirs, sdks)})
	// Each surface (and its test helpers) stands alone.
	for _, d := range surfaceDirs {
		var others []string
		for _, o := range surfaceDirs {
			if o != d {
				others = append(others, o)
			}
		}
		rs = append(rs, rule{pkg: d, why: "a surface is built from plain arguments: no other surface, no executor, no config types",
			forbid: join(others, []string{executor, module + "/internal/config", store, module + "/internal/runner"})})
	}
	return rs
}

// under reports whether path is prefix or inside it.
func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// graph is what `go list -deps` says: each package's direct and transitive
// imports and whether it is in the standard library.
type graph struct {
	imports  map[string][]string
	deps     map[string][]string
	standard map[string]bool
}

// through names the direct import of p by which p reaches d.
func (g graph) through(p, d string) string {
	for _, i := range g.imports[p] {
		if i == d || slices.Contains(g.deps[i], d) {
			return i
		}
	}
	return d
}

// violations lists, for each rule, the packages under its pkg that reach a
// forbidden one.
func (g graph) violations(rs []rule) []string {
	var out []string
	pkgs := make([]string, 0, len(g.deps))
	for p := range g.deps {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, r := range rs {
		seen := false
		for _, p := range pkgs {
			if p != r.pkg && (r.exact || !under(p, r.pkg)) {
				continue
			}
			seen = true
			var bad []string
			for _, d := range g.deps[p] {
				if slices.ContainsFunc(bad, func(b string) bool { return under(d, b) }) {
					continue // its parent package is named already
				}
				no := r.stdOnly && !g.standard[d] && !under(d, r.pkg)
				for _, f := range r.forbid {
					no = no || under(d, f)
				}
				if no {
					bad = append(bad, d)
					via := ""
					if t := g.through(p, d); t != d {
						via = " through " + strings.TrimPrefix(t, module+"/")
					}
					out = append(out, fmt.Sprintf("%s reaches %s%s (%s)", strings.TrimPrefix(p, module+"/"), d, via, r.why))
				}
			}
		}
		if !seen {
			out = append(out, fmt.Sprintf("rule for %s: no such package (the table names a package that moved?)", r.pkg))
		}
	}
	return out
}

// goList runs `go list -deps` over the module's own packages.
func goList(t *testing.T) graph {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the layering test runs `go list`: the go command is not on PATH: %v", err)
	}
	cmd := exec.Command(goCmd, "list", "-deps", "-f",
		"{{.ImportPath}} {{.Standard}} |{{range .Imports}} {{.}}{{end}} |{{range .Deps}} {{.}}{{end}}", module+"/...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderr.String())
	}
	g := graph{imports: map[string][]string{}, deps: map[string][]string{}, standard: map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		head, rest, ok1 := strings.Cut(sc.Text(), " |")
		imports, deps, ok2 := strings.Cut(rest, " |")
		f := strings.Fields(head)
		if !ok1 || !ok2 || len(f) != 2 {
			t.Fatalf("go list: unexpected line %q", sc.Text())
		}
		g.standard[f[0]] = f[1] == "true"
		if under(f[0], module) {
			g.imports[f[0]] = strings.Fields(imports)
			g.deps[f[0]] = strings.Fields(deps)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return g
}

// surfaceDirs are the direct subpackages of surfaces: one surface (or the
// conformance suite) each.
func surfaceDirs(g graph) []string {
	var out []string
	for p := range g.deps {
		rest, ok := strings.CutPrefix(p, module+"/surfaces/")
		if ok && !strings.Contains(rest, "/") {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func TestLayers(t *testing.T) {
	g := goList(t)
	dirs := surfaceDirs(g)
	if len(dirs) < 3 {
		t.Fatalf("found surfaces %v: want at least terminal, github and discord", dirs)
	}
	for _, v := range g.violations(rules(dirs)) {
		t.Error(v)
	}
}

// TestLayersCatches checks the checker: a graph with forbidden edges gives
// one violation per edge, named.
func TestLayersCatches(t *testing.T) {
	surfs := []string{module + "/surfaces/github", module + "/surfaces/terminal"}
	g := graph{
		deps: map[string][]string{
			module + "/questions":               {"strings", "gopkg.in/yaml.v3"},
			module + "/specs":                   {module + "/internal/config", module + "/internal/store", "modernc.org/sqlite"},
			module + "/internal/config":         {module + "/internal/approvals", module + "/internal/approvals/gate"},
			module + "/internal/approvals":      {"github.com/jackc/pgx/v5"},
			module + "/internal/approvals/gate": {module + "/internal/store"},
			module + "/executor":                {module + "/questions"},
			module + "/internal/runner":         {module + "/surfaces"},
			module + "/internal/store":          {module + "/executor"},
			module + "/surfaces":                {"github.com/google/go-github/v60/github"},
			module + "/surfaces/github":         {module + "/surfaces", "github.com/google/go-github/v60/github"},
			module + "/surfaces/terminal":       {module + "/surfaces/github"},
			module + "/surfaces/github/sub":     {module + "/internal/config"},
		},
		standard: map[string]bool{"strings": true},
	}
	got := g.violations(rules(surfs))
	want := []string{
		"questions reaches gopkg.in/yaml.v3",
		"specs reaches " + module + "/internal/store",
		"specs reaches modernc.org/sqlite",
		"internal/config reaches " + module + "/internal/approvals/gate",
		"internal/approvals reaches github.com/jackc/pgx/v5",
		"executor reaches " + module + "/questions",
		"surfaces reaches github.com/google/go-github/v60/github",
		"surfaces/terminal reaches " + module + "/surfaces/github",
		"surfaces/github/sub reaches " + module + "/internal/config",
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, w+" (") }) {
			t.Errorf("no violation %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
	// Nothing else: surfaces/github may use its SDK, gate the store, the
	// runner the surfaces interface.
	if len(got) != len(want) {
		t.Errorf("got %d violations, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
}
