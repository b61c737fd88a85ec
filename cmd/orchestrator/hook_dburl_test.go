package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHookDatabaseURLFile: the database_url left for the hook is the
// owner's only, read back as written, rewritten when it changes and gone
// when the store is SQLite again.
func TestHookDatabaseURLFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if u, err := readHookDatabaseURL(dir); err != nil || u != "" {
		t.Fatalf("none yet: %q, %v", u, err)
	}
	for _, want := range []string{"postgres://a@h/db", "postgres://b@h/db"} {
		if err := writeHookDatabaseURL(dir, want); err != nil {
			t.Fatal(err)
		}
		if u, err := readHookDatabaseURL(dir); err != nil || u != want {
			t.Fatalf("read %q, %v; want %q", u, err, want)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, hookDatabaseURLFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	if err := writeHookDatabaseURL(dir, ""); err != nil {
		t.Fatal(err)
	}
	if u, err := readHookDatabaseURL(dir); err != nil || u != "" {
		t.Fatalf("after SQLite again: %q, %v", u, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}
