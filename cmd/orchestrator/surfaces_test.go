package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestSurfaceKinds checks the table of surfaces against everything that
// names a surface: every row has its configuration block (config.Surfaces),
// is turned on by its block's enabled key, has its block checked by
// Validate, is built by buildSurface, and is documented in --help,
// config.example.yaml and docs/surfaces.md.
func TestSurfaceKinds(t *testing.T) {
	t.Parallel()
	var names []string
	for _, k := range surfaceKinds {
		names = append(names, k.name)
		if k.help == "" || k.build == nil {
			t.Errorf("%s: help %q, build set %v", k.name, k.help, k.build != nil)
		}
	}
	if !slices.Equal(names, config.SurfaceNames()) {
		t.Fatalf("table %v, config.Surfaces %v: a surface is one row and one block, in the same order", names, config.SurfaceNames())
	}

	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "surfaces.md"))
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join("..", "..", "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tm := newTestMain(t)
	if code := tm.exec("--help"); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	help := tm.stdout.String()
	tm.stdout.Reset()
	tm.exec("run", "--help")
	runHelp := tm.stdout.String()

	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	for _, k := range surfaceKinds {
		t.Run(k.name, func(t *testing.T) {
			// Documented.
			if !strings.Contains(string(readme), "surfaces."+k.name) {
				t.Errorf("docs/surfaces.md does not mention surfaces.%s", k.name)
			}
			if !strings.Contains(string(example), "\n  "+k.name+":\n") {
				t.Errorf("config.example.yaml has no surfaces.%s block", k.name)
			}
			if !strings.Contains(help, k.name) || !strings.Contains(help, k.help) {
				t.Errorf("--help lacks %s: %s", k.name, k.help)
			}
			if !strings.Contains(runHelp, k.name) {
				t.Errorf("run --help's --surface lacks %s", k.name)
			}

			// Enabled by its block, and only by it.
			for _, on := range []bool{true, false} {
				yaml := "surfaces:\n"
				for _, other := range names {
					yaml += "  " + other + ":\n    enabled: " + map[bool]string{true: "true", false: "false"}[other == k.name && on] + "\n"
				}
				cfg, err := config.ParseEnv(strings.NewReader(yaml), "s.yaml", func(string) (string, bool) { return "", false })
				if err != nil {
					t.Fatal(err)
				}
				if got := enabledSurfaces(cfg); on != slices.Equal(got, []string{k.name}) || !on && len(got) != 0 {
					t.Errorf("enabled: %v gives enabled surfaces %v", on, got)
				}

				// Validated: Validate reports what the block's Check finds.
				if !on {
					continue
				}
				var want int
				cfg.Surfaces.Surface(k.name).Check(config.NewChecker(func(string, string) { want++ }))
				got := 0
				for _, e := range config.Errors(cfg.Validate()) {
					if strings.Contains(e.Error(), "surfaces."+k.name+".") {
						got++
					}
				}
				if got != want {
					t.Errorf("Validate reports %d problems of surfaces.%s, its Check %d", got, k.name, want)
				}
			}

			// Wired: buildSurface knows it (the defaults may not be enough
			// to build it, but the error is the surface's own).
			m := newTestMain(t).Main
			m.Config = config.DefaultEnv(m.LookupEnv)
			m.Logger = newLogger(m.Stderr, m.Config.Log)
			sf, err := m.buildSurface(k.name, nil, st)
			if err != nil && strings.Contains(err.Error(), "unknown surface") {
				t.Errorf("buildSurface: %v", err)
			}
			if err == nil && sf == nil {
				t.Error("buildSurface returned neither a surface nor an error")
			}
			m.Close()
		})
	}
}
