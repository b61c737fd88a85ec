package specs

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/yamlfile"
	"gopkg.in/yaml.v3"
)

// frontmatterKeys lists the dotted yaml keys of the struct tree of t, down
// into sections (Git, Approvals) but not into types that decode themselves.
func frontmatterKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for name, idx := range yamlfile.Fields(t) {
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		keys = append(keys, key)
		f := t.FieldByIndex(idx).Type
		if f.Kind() == reflect.Pointer {
			f = f.Elem()
		}
		if f.Kind() == reflect.Struct && !reflect.PointerTo(f).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
			keys = append(keys, frontmatterKeys(f, key)...)
		}
	}
	slices.Sort(keys)
	return keys
}

// TestDocsSpecs checks that docs/specs.md has a row for every frontmatter
// key of a spec, and no row for a key a spec does not have.
func TestDocsSpecs(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/specs.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "\n## Every frontmatter key\n")
	section, _, _ = strings.Cut(section, "\n## ")
	keys := frontmatterKeys(reflect.TypeFor[frontmatter](), "")
	if !slices.Contains(keys, "git.pull_request.draft") || !slices.Contains(keys, "approvals.approval_hold") || len(keys) < 25 {
		t.Fatalf("the walk found too few keys: %v", keys)
	}
	known := map[string]bool{}
	for _, key := range keys {
		known[key] = true
		if !strings.Contains(section, "| `"+key+"` |") {
			t.Errorf("frontmatter key %s has no row in docs/specs.md (its table of every key)", key)
		}
	}
	for _, line := range strings.Split(section, "\n") {
		if key, ok := strings.CutPrefix(line, "| `"); ok {
			if key, _, ok = strings.Cut(key, "` |"); ok && !known[key] {
				t.Errorf("docs/specs.md has a row for %s, which is no frontmatter key", key)
			}
		}
	}
}
