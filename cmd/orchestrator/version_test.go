package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestVersionOfBuildInfo: the version, commit and date come from -ldflags,
// else the build info's module version, VCS revision and VCS time; a build
// that recorded nothing still prints something that says so, never an
// empty string.
func TestVersionOfBuildInfo(t *testing.T) {
	t.Parallel()
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261123205400-da786e7abcde+dirty"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "da786e7abcdef0123456789"},
		{Key: "vcs.time", Value: "2026-11-23T20:54:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	noVCS := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	for _, tt := range []struct {
		name           string
		ver, rev, date string
		info           *debug.BuildInfo
		ok             bool
		wantVer        string
		wantRev        string
		wantDate       string
		wantLinePart   string
		wantJSONCommit string
		wantJSONDate   string
	}{
		{"ldflags win", "v1.2.3", "abc1234", "2026-11-25T08:00:00Z", vcs, true, "v1.2.3", "abc1234", "2026-11-25T08:00:00Z",
			"orchestrator v1.2.3 (commit abc1234 of 2026-11-25T08:00:00Z, go", "abc1234", "2026-11-25T08:00:00Z"},
		// goreleaser stamps the full commit and its date in UTC; a zone
		// other than UTC is converted.
		{"ldflags without vcs", "v1.2.3", "0123456789abcdef0123456789abcdef01234567-dirty", "2026-11-25T09:00:00+01:00", noVCS, true,
			"v1.2.3", "0123456789ab-dirty", "2026-11-25T08:00:00Z",
			"orchestrator v1.2.3 (commit 0123456789ab of 2026-11-25T08:00:00Z with local changes, go", "0123456789ab", "2026-11-25T08:00:00Z"},
		// A stamped commit does not take the build's VCS time.
		{"ldflags commit only", "", "abc1234", "", vcs, true, "v0.0.0-20261123205400-da786e7abcde+dirty", "abc1234", "",
			"(commit abc1234, go", "abc1234", "unknown"},
		{"a date that is no RFC 3339 is kept", "v1", "abc1234", "yesterday", nil, false, "v1", "abc1234", "yesterday",
			"(commit abc1234 of yesterday, go", "abc1234", "yesterday"},
		{"vcs info", "", "", "", vcs, true, "v0.0.0-20261123205400-da786e7abcde+dirty", "da786e7abcde-dirty", "2026-11-23T20:54:00Z",
			"(commit da786e7abcde of 2026-11-23T20:54:00Z with local changes, go", "da786e7abcde", "2026-11-23T20:54:00Z"},
		{"devel without vcs", "", "", "", noVCS, true, "", "", "",
			"orchestrator devel (no module version or VCS revision was recorded", "unknown", "unknown"},
		{"no build info", "", "", "", nil, false, "", "", "", "orchestrator devel (no module version", "unknown", "unknown"},
	} {
		ver, rev, date := versionOf(tt.ver, tt.rev, tt.date, tt.info, tt.ok)
		if ver != tt.wantVer || rev != tt.wantRev || date != tt.wantDate {
			t.Errorf("%s: versionOf = %q, %q, %q, want %q, %q, %q", tt.name, ver, rev, date, tt.wantVer, tt.wantRev, tt.wantDate)
		}
		rep := newVersionReport(ver, rev, date)
		if line := rep.line(); !strings.Contains(line, tt.wantLinePart) {
			t.Errorf("%s: line %q lacks %q", tt.name, line, tt.wantLinePart)
		}
		if rep.Version == "" || rep.Commit != tt.wantJSONCommit || rep.Date != tt.wantJSONDate {
			t.Errorf("%s: report %+v, want commit %q and date %q", tt.name, rep, tt.wantJSONCommit, tt.wantJSONDate)
		}
	}
}

// TestVersionOfBuiltBinary builds the command with go build: in a git
// checkout the binary prints the module version and the checkout's
// revision; elsewhere (no git, an exported tree) it says what it lacks.
func TestVersionOfBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "orchestrator")
	// -buildvcs=auto on the command line: GOFLAGS=-buildvcs=false in the
	// environment must not decide what this test sees.
	build := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(out))
	jout, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var rep versionReport
	if err := json.Unmarshal(jout, &rep); err != nil {
		t.Fatalf("version --json: %v\n%s", err, jout)
	}
	if rep.V != 1 || rep.Version == "" || rep.Commit == "" || !strings.HasPrefix(rep.Go, "go") || rep.Platform == "" || rep.License != "Apache-2.0" {
		t.Errorf("version --json = %s", jout)
	}
	// What go build recorded decides what to expect: it records the VCS
	// revision in a git checkout with git installed, not in an exported
	// tree, nor (as of Go 1.26) in a linked git worktree.
	meta, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	rev := ""
	for _, l := range strings.Split(string(meta), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision=") {
			rev = strings.TrimPrefix(f[1], "vcs.revision=")
		}
	}
	if rev == "" {
		t.Logf("go build recorded no VCS revision here: checking the message that says so")
		if rep.Commit != "unknown" || rep.Date != "unknown" || !strings.Contains(line, "no module version or VCS revision was recorded") {
			t.Errorf("without VCS information: version = %q, --json %s", line, jout)
		}
		return
	}
	want := rev[:12]
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil && !strings.HasPrefix(strings.TrimSpace(string(head)), want) {
		t.Errorf("go build recorded %s, git says HEAD is %s", rev, head)
	}
	if rep.Commit != want || !strings.Contains(line, "commit "+want) {
		t.Errorf("version = %q, --json %s; want commit %s", line, jout, want)
	}
	if _, err := time.Parse(time.RFC3339, rep.Date); err != nil || !strings.Contains(line, " of "+rep.Date) {
		t.Errorf("version = %q, --json %s; want the commit's date", line, jout)
	}
	if rep.Version == "devel" || strings.Contains(line, "devel") {
		t.Errorf("a build from a git checkout prints devel: %q", line)
	}
}

// TestVersionOfStampedBinary builds the command as make build and the
// release builds (.goreleaser.yaml) do, with -buildvcs=false and the
// version, commit and date set at link time: version prints those.
func TestVersionOfStampedBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "orchestrator")
	const full = "0123456789abcdef0123456789abcdef01234567"
	build := exec.Command("go", "build", "-buildvcs=false", "-trimpath", "-o", bin,
		"-ldflags", "-X main.version=v1.2.3 -X main.commit="+full+"-dirty -X main.date=2026-11-25T08:00:00Z", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if line, want := strings.TrimSpace(string(out)), "orchestrator v1.2.3 (commit 0123456789ab of 2026-11-25T08:00:00Z with local changes, go"; !strings.HasPrefix(line, want) {
		t.Errorf("version = %q, want it to start with %q", line, want)
	}
	jout, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var rep versionReport
	if err := json.Unmarshal(jout, &rep); err != nil {
		t.Fatalf("version --json: %v\n%s", err, jout)
	}
	if rep.Version != "v1.2.3" || rep.Commit != "0123456789ab" || !rep.Modified || rep.Date != "2026-11-25T08:00:00Z" {
		t.Errorf("version --json = %s", jout)
	}
}
