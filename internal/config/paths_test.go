package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestEveryPathKeyIsRelativeToTheFile: each key that holds a file or
// folder, set to a relative path, is taken relative to the configuration
// file's folder (not to where the orchestrator was started), and "~/" to
// the home folder.
func TestEveryPathKeyIsRelativeToTheFile(t *testing.T) {
	t.Parallel()
	var c Config
	for key := range c.pathKeys() {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "orchestrator.yaml")
			for _, tt := range []struct{ value, want string }{
				{"./rel/thing", filepath.Join(dir, "rel", "thing")},
				{"rel/thing", filepath.Join(dir, "rel", "thing")},
				{"~/thing", filepath.FromSlash("/home/u/thing")},
				{"/abs/thing", "/abs/thing"},
			} {
				if err := os.WriteFile(path, []byte(yamlAt(key, tt.value)), 0o600); err != nil {
					t.Fatal(err)
				}
				cfg, err := LoadEnv(path, env("HOME", "/home/u"))
				if err != nil {
					t.Fatalf("%s: %s: %v", key, tt.value, err)
				}
				if got := *cfg.pathKeys()[key]; got != tt.want {
					t.Errorf("%s: %q became %q, want %q", key, tt.value, got, tt.want)
				}
			}
		})
	}
	// A command without a slash is a name looked up on PATH.
	dir := t.TempDir()
	path := filepath.Join(dir, "orchestrator.yaml")
	if err := os.WriteFile(path, []byte("agent:\n  command: claude-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadEnv(path, env("HOME", "/home/u"))
	if err != nil || cfg.Agent.Command != "claude-2" {
		t.Errorf("agent.command = %q, %v; want the name as it is", cfg.Agent.Command, err)
	}
}

// yamlAt is a YAML document setting the dotted key to value.
func yamlAt(key, value string) string {
	parts := strings.Split(key, ".")
	var b strings.Builder
	for i, p := range parts {
		b.WriteString(strings.Repeat("  ", i) + p + ":")
		if i == len(parts)-1 {
			b.WriteString(" " + value)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestPathKeysListEveryPath: a configuration key whose name says it holds
// a file or folder is in pathKeys, so that a key added later cannot be
// left relative to the working directory.
func TestPathKeysListEveryPath(t *testing.T) {
	t.Parallel()
	var c Config
	listed := c.pathKeys()
	var walk func(typ reflect.Type, prefix string)
	walk = func(typ reflect.Type, prefix string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			key := prefix + name
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft.PkgPath() == typ.PkgPath() {
				walk(ft, key+".")
				continue
			}
			if ft.Kind() != reflect.String {
				continue
			}
			pathLike := name == "dir" || name == "workdir" || name == "mcp_config" || name == "command" ||
				strings.HasSuffix(name, "_dir") || strings.HasSuffix(name, "_file") || strings.HasSuffix(name, "_path")
			if _, ok := listed[key]; pathLike && !ok {
				t.Errorf("%s holds a path but is not in pathKeys (resolvePaths would leave it relative to the working directory)", key)
			}
		}
	}
	walk(reflect.TypeOf(c), "")
}
