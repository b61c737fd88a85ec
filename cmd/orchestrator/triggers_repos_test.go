package main

import (
	"strings"
	"testing"
)

// TestValidateTriggerRepoSpecs: an entry of triggers.github.repos naming a
// spec that specs.dir lacks is a problem at its file, line and key; an
// unknown key of an entry is one too.
func TestValidateTriggerRepoSpecs(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	tm.write(t, "specs/api.md", "---\nname: api\nsurfaces: [github]\n---\nDo the API's work.\n")
	base := "surfaces:\n  github:\n    enabled: true\n    token: t\n    repo: acme/app\nspecs:\n  dir: specs\ntriggers:\n  github:\n    enabled: true\n    spec: api\n    repos:\n"
	tm.write(t, DefaultConfigFile, base+"      - {repo: acme/api, spec: api}\n      - repo: acme/web\n        spec: web\n")
	if code := tm.exec("validate"); code != exitUsage {
		t.Fatalf("exit %d, want %d; stdout %s stderr %s", code, exitUsage, tm.stdout.String(), tm.stderr.String())
	}
	want := `orchestrator.yaml:15: triggers.github.repos[1].spec: no spec named "web" in specs.dir (known: api)`
	if got := tm.stderr.String(); !strings.Contains(got, want) || strings.Contains(got, "repos[0]") {
		t.Errorf("stderr %q\nwant %q only", got, want)
	}

	tm = newTestMain(t)
	tm.write(t, "specs/api.md", "---\nname: api\nsurfaces: [github]\n---\nDo the API's work.\n")
	tm.write(t, DefaultConfigFile, base+"      - repo: acme/api\n        labls: [x]\n")
	if code := tm.exec("validate"); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, tm.stderr.String())
	}
	if want := `orchestrator.yaml:14: triggers.github.repos[0].labls: unknown key (did you mean "labels"?)`; !strings.Contains(tm.stderr.String(), want) {
		t.Errorf("stderr %q\nwant %q", tm.stderr.String(), want)
	}

	tm = newTestMain(t)
	tm.write(t, "specs/api.md", "---\nname: api\nsurfaces: [github]\n---\nDo the API's work.\n")
	tm.write(t, DefaultConfigFile, base+"      - {repo: acme/api, spec: api}\n      - acme/app\n")
	if code := tm.exec("validate"); code != 0 {
		t.Errorf("exit %d; stdout %s stderr %s", code, tm.stdout.String(), tm.stderr.String())
	}
}
