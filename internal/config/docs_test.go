package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestDocsConfiguration checks that docs/configuration.md names every key
// of Config (as `dotted.key`), as TestExampleHasEveryKey checks
// config.example.yaml: a key added to the types is documented in both.
func TestDocsConfiguration(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "\n## Every key\n")
	table, _, _ = strings.Cut(table, "\n## ")
	keys := yamlKeys(reflect.TypeFor[Config](), "")
	if len(keys) < 60 {
		t.Fatalf("found only %d keys: %v", len(keys), keys)
	}
	known := map[string]bool{}
	for _, key := range keys {
		known[key] = true
		if !strings.Contains(table, "| `"+key+"` |") {
			t.Errorf("key %s has no row in docs/configuration.md's table of every key", key)
		}
	}
	// And no row of that table names a key the types do not have.
	for _, line := range strings.Split(table, "\n") {
		if key, ok := strings.CutPrefix(line, "| `"); ok {
			if key, _, ok = strings.Cut(key, "` |"); ok && !known[key] {
				t.Errorf("docs/configuration.md has a row for %s, which is no key of the configuration", key)
			}
		}
	}
}
