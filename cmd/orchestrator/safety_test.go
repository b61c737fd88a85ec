package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestValidateEvery1msSchedule: a schedule firing more often than
// serve.min_schedule_interval is refused by validate with file:line, and
// by serve; lowering the setting on purpose lets it through.
func TestValidateEvery1msSchedule(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	tm.write(t, "specs/fast.md", "---\nname: fast\nschedule: \"@every 1ms\"\nsurfaces: [terminal]\n---\nT\n")
	if code := tm.exec("validate"); code != exitUsage {
		t.Fatalf("validate: exit %d, want %d; stderr %s", code, exitUsage, tm.stderr.String())
	}
	if want := `fast.md:3: schedule: "@every 1ms" fires every 1s, more often than serve.min_schedule_interval (1m0s) allows`; !strings.Contains(tm.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, tm.stderr.String())
	}

	tm = newTestMain(t)
	tm.write(t, "specs/fast.md", "---\nname: fast\nschedule: \"@every 10s\"\nsurfaces: [terminal]\n---\nT\n")
	tm.write(t, DefaultConfigFile, "state_dir: state\nserve:\n  listen: 127.0.0.1:0\n")
	if code := tm.exec("serve"); code != exitUsage || !strings.Contains(tm.stderr.String(), "fast.md:3: schedule") {
		t.Fatalf("serve: exit %d, stderr %s", code, tm.stderr.String())
	}

	tm.write(t, DefaultConfigFile, "serve:\n  min_schedule_interval: 1s\n")
	tm.stdout.Reset()
	if code := tm.exec("validate"); code != 0 {
		t.Fatalf("validate with min_schedule_interval 1s: exit %d, stderr %s", code, tm.stderr.String())
	}
}

// TestValidatePollInterval1ns: poll_interval below its floor is a validate
// error with file:line that names the floor.
func TestValidatePollInterval1ns(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	tm.write(t, DefaultConfigFile, "surfaces:\n  github:\n    enabled: true\n    token: t\n    repo: o/r\n    poll_interval: 1ns\n")
	if code := tm.exec("validate"); code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	if want := "orchestrator.yaml:6: surfaces.github.poll_interval: must be at least 1s, got 1ns"; !strings.Contains(tm.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, tm.stderr.String())
	}
}

// TestValidateBypassPermissionsWithoutOptIn: bypassPermissions, in the
// configuration or a spec, needs dangerously_skip_permissions: true.
func TestValidateBypassPermissionsWithoutOptIn(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	tm.write(t, DefaultConfigFile, "agent:\n  permission_mode: bypassPermissions\n")
	tm.write(t, "specs/yolo.md", "---\nname: yolo\npermission_mode: bypassPermissions\n---\nT\n")
	if code := tm.exec("validate"); code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	for _, want := range []string{
		"orchestrator.yaml:2: agent.permission_mode: bypassPermissions skips every permission check",
		"yolo.md:3: permission_mode: bypassPermissions skips every permission check",
	} {
		if !strings.Contains(tm.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, tm.stderr.String())
		}
	}
	// run refuses the spec before starting anything.
	tm.write(t, DefaultConfigFile, "state_dir: state\n")
	tm.stderr.Reset()
	if code := tm.exec("run", "specs/yolo.md"); code != exitUsage || !strings.Contains(tm.stderr.String(), "dangerously_skip_permissions") {
		t.Fatalf("run: exit %d, stderr %s", code, tm.stderr.String())
	}
	tm.write(t, DefaultConfigFile, "agent:\n  permission_mode: bypassPermissions\n  dangerously_skip_permissions: true\n")
	tm.stderr.Reset()
	if code := tm.exec("validate"); code != 0 {
		t.Fatalf("with the opt-in: exit %d, stderr %s", code, tm.stderr.String())
	}
}

// TestStatusWithGitHubTokenUnset: status, answer and cancel need no
// surface, so an unset ${GITHUB_TOKEN} does not stop them; run, which asks
// on GitHub, still says it is unset.
func TestStatusWithGitHubTokenUnset(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	tm.write(t, DefaultConfigFile, "state_dir: state\nsurfaces:\n  github:\n    enabled: true\n    token: ${GITHUB_TOKEN}\n    repo: o/r\n")
	if code := tm.exec("status"); code != 0 {
		t.Fatalf("status: exit %d, stderr %s", code, tm.stderr.String())
	}
	if code := tm.exec("cancel", "nosuchrun"); code == exitUsage || strings.Contains(tm.stderr.String(), "GITHUB_TOKEN") {
		t.Errorf("cancel: exit %d, stderr %s", code, tm.stderr.String())
	}
	if code := tm.exec("answer", "qnone", "1"); code == exitUsage || strings.Contains(tm.stderr.String(), "GITHUB_TOKEN") {
		t.Errorf("answer: exit %d, stderr %s", code, tm.stderr.String())
	}
	tm.stderr.Reset()
	if code := tm.exec("run", "--prompt", "x"); code != exitUsage || !strings.Contains(tm.stderr.String(), "orchestrator.yaml:5: surfaces.github.token: environment variable GITHUB_TOKEN is not set") {
		t.Fatalf("run: exit %d, stderr %s", code, tm.stderr.String())
	}
	// Other problems still stop status.
	tm.write(t, DefaultConfigFile, "state_dir: state\nlog:\n  level: loud\nsurfaces:\n  github:\n    token: ${GITHUB_TOKEN}\n")
	if code := tm.exec("status"); code != exitUsage {
		t.Fatalf("status with a bad log.level: exit %d", code)
	}
}

// TestServeWarnsPublicListen: serve on a non-loopback address logs that
// /metrics is public.
func TestServeWarnsPublicListen(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	tm.write(t, "specs/README.md", "# none\n")
	tm.write(t, DefaultConfigFile, "state_dir: state\nsurfaces:\n  terminal:\n    enabled: false\nserve:\n  listen: 0.0.0.0:0\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tm.serveReady = func(string) { cancel() }
	tm.Exec(ctx, []string{"serve"})
	if want := "/metrics and /healthz are public"; !strings.Contains(tm.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, tm.stderr.String())
	}
}

// TestValidateChecksSpecsWhenConfigHasErrors: a problem at a key of the
// configuration does not hide the specs' problems.
func TestValidateChecksSpecsWhenConfigHasErrors(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	tm.write(t, DefaultConfigFile, "agent:\n  modle: x\n")
	tm.write(t, "specs/s.md", "---\nschedul: '@daily'\n---\nT\n")
	if code := tm.exec("validate"); code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	for _, want := range []string{
		`orchestrator.yaml:2: agent.modle: unknown key (did you mean "model"?)`,
		`s.md:2: schedul: unknown key (did you mean "schedule"?)`,
		"orchestrator: 2 problems found",
	} {
		if !strings.Contains(tm.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, tm.stderr.String())
		}
	}
}

// TestValidateSpecWithMissingWorkdir: validate, given spec files, checks
// the files a spec names, with file and line.
func TestValidateSpecWithMissingWorkdir(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	tm.write(t, "a.md", "---\nname: a\nworkdir: nowhere\nmcp_config: mcp.json\n---\nT\n")
	tm.write(t, "mcp.json", "{not json")
	tm.write(t, "b.md", "---\nname: b\nworkdir: a.md\n---\nT\n")
	if code := tm.exec("validate", "a.md", "b.md"); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, tm.stderr.String())
	}
	for _, want := range []string{
		"a.md:3: workdir: " + filepath.Join(tm.Dir, "nowhere") + ": no such file or directory",
		"a.md:4: mcp_config: " + filepath.Join(tm.Dir, "mcp.json") + " is not a JSON document",
		"b.md:3: workdir: " + filepath.Join(tm.Dir, "a.md") + " is not a directory",
	} {
		if !strings.Contains(tm.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, tm.stderr.String())
		}
	}
	tm.write(t, "c.md", "---\nname: c\nworkdir: .\n---\nT\n")
	tm.stdout.Reset()
	if code := tm.exec("validate", "c.md"); code != 0 || !strings.Contains(tm.stdout.String(), "specs c.md: 1 ok (c)") {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, tm.stdout.String(), tm.stderr.String())
	}
}
