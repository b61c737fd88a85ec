package executor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProjectDirName(t *testing.T) {
	t.Parallel()
	long := "/" + strings.Repeat("a", 250)
	for dir, want := range map[string]string{
		"/home/dev/my.proj_1":            "-home-dev-my-proj-1",
		"/srv/réal":                      "-srv-r-al", // one UTF-16 unit, one '-'
		"/srv/x😀":                        "-srv-x--",  // a surrogate pair is two
		"/x😀" + strings.Repeat("b", 300): "-x--" + strings.Repeat("b", 196) + "-py6xx0",
		long:                             "-" + strings.Repeat("a", 199) + "-feo44x", // cut, then the CLI's hash (computed with its JS)
	} {
		if got := projectDirName(dir); got != want {
			t.Errorf("projectDirName(%q) = %q, want %q", dir, got, want)
		}
	}
}

func TestWriteSessionReplacesWhole(t *testing.T) {
	t.Parallel()
	home, wd := t.TempDir(), t.TempDir()
	e, _ := New(Config{BaseEnv: []string{}, Env: map[string]string{"HOME": home}})
	if _, err := e.ReadSession(wd, "s1"); !errors.Is(err, ErrSessionFileNotFound) {
		t.Fatalf("missing session: %v", err)
	}
	for _, content := range []string{"a long first version\n", "short\n"} {
		if err := e.WriteSession(wd, "s1", []byte(content)); err != nil {
			t.Fatal(err)
		}
		if got, err := e.ReadSession(wd, "s1"); err != nil || string(got) != content {
			t.Fatalf("read back %q, %v; want %q", got, err, content)
		}
	}
	path, _ := e.SessionPath(wd, "s1")
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := e.WriteSession(wd, "s1", []byte(`{"type":"user","message":{"role":"user","content":"short"}}`+"\n")); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.SessionTranscriptHas("s1", "short"); !ok || err != nil {
		t.Errorf("SessionTranscriptHas does not find the written file: %v %v", ok, err)
	}
	if err := e.WriteSession(wd, "../s1", nil); err == nil {
		t.Error("path in session id accepted")
	}
	os.Chmod(filepath.Dir(path), 0o500)
	defer os.Chmod(filepath.Dir(path), 0o700)
	if os.Geteuid() != 0 { // root writes anyway
		if err := e.WriteSession(wd, "s1", []byte("x")); err == nil || !strings.Contains(err.Error(), "s1") {
			t.Errorf("write into a read-only folder: %v", err)
		}
	}
}
