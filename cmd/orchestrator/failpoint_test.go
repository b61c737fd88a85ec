package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// envFailpoint names the environment variable that makes a crash test's
// child process (this test binary, see TestMain) kill itself with SIGKILL
// at a step of the run loop (runner.Config.Failpoint). Only test builds
// read it: the orchestrator binary has no failpoint.
const envFailpoint = "ORCHESTRATOR_FAILPOINT"

// failpointFromEnv returns the failpoint hook the environment asks for, or
// nil.
func failpointFromEnv(m *Main) func(string) {
	want := os.Getenv(envFailpoint)
	if want == "" {
		return nil
	}
	return func(point string) {
		if point == want {
			if m.Logger != nil {
				m.Logger.Warn("failpoint: killing the process", "point", point)
			}
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}

// TestFailpointOnlyInTestBuilds: no non-test source of the module reads
// ORCHESTRATOR_FAILPOINT, and a Main built as the binary builds it has no
// failpoint even when the variable is set.
func TestFailpointOnlyInTestBuilds(t *testing.T) {
	t.Setenv(envFailpoint, "claimed")
	if NewMain().failpoint != nil {
		t.Fatal("NewMain has a failpoint")
	}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), envFailpoint) {
			t.Errorf("%s mentions %s: a failpoint must exist only in test builds", path, envFailpoint)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
