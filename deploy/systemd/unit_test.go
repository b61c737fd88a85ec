// Package systemd holds the systemd unit of `orchestrator serve`
// (orchestrator.service) and the test that checks it.
package systemd

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const unitFile = "orchestrator.service"

// shippedBinary is the ExecStart= path of the unit as shipped.
const shippedBinary = "/usr/local/bin/orchestrator"

// installHint is how to get systemd-analyze on Debian (what `make test`
// runs when it is missing).
const installHint = "apt-get install -y systemd (or run `make test`, which installs it)"

// TestUnitVerifies runs `systemd-analyze verify` on the unit. verify also
// requires ExecStart='s program to exist, which it does not on a machine
// without the orchestrator installed: the copy it checks names an
// executable that exists (this test's own binary) instead, and nothing else
// changes. Any output fails the test, so a misspelt or unknown key (which
// verify only warns about) is caught too.
func TestUnitVerifies(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("systemd units are Linux's; this is %s", runtime.GOOS)
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("this test needs systemd-analyze, which is not installed: %s", installHint)
	}
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(unit, []byte("ExecStart="+shippedBinary+" ")) {
		t.Fatalf("%s: ExecStart= does not run %s", unitFile, shippedBinary)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	check := filepath.Join(dir, unitFile)
	if err := os.WriteFile(check, bytes.ReplaceAll(unit, []byte(shippedBinary), []byte(self)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", "--man=no", check)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unitFile, err, out)
	}
}

// TestUnitSettings checks what verify cannot: the settings the service
// relies on are there, each once.
func TestUnitSettings(t *testing.T) {
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", unitFile, line)
		}
		got[k] = append(got[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"User":            "orchestrator",
		"StateDirectory":  "orchestrator",
		"Environment":     "HOME=%S/orchestrator", // the CLI's sessions live in the state directory
		"EnvironmentFile": "/etc/orchestrator/env",
		"NoNewPrivileges": "yes",
		"ProtectSystem":   "strict",
		"ProtectHome":     "yes",
		"PrivateTmp":      "yes",
		"Restart":         "on-failure",
		"KillSignal":      "SIGTERM",
		// serve exits 130 (cmd/orchestrator's exitCancelled) after a SIGTERM
		// that arrives while it starts: `systemctl stop` then is no failure.
		"SuccessExitStatus": "130",
		// serve waits up to 30 s (internal/daemon's ShutdownTimeout) for
		// the interrupted turns, then closes HTTP: stop must not kill it
		// before.
		"TimeoutStopSec": "90",
	}
	for k, v := range want {
		if vs := got[k]; len(vs) != 1 || vs[0] != v {
			t.Errorf("%s: %s=%v, want %s=%s once", unitFile, k, vs, k, v)
		}
	}
	if len(got["ReadWritePaths"]) == 0 {
		t.Errorf("%s: no ReadWritePaths=: under ProtectSystem=strict the clones could not be written", unitFile)
	}
}
