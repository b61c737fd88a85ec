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

// TestDeliveryOptionsOfARunFromAnIssue: a run started from an issue
// delivers to the issue's repository, from a checkout of it, whatever
// git.repo and surfaces.github.repo say; another run to the configured one.
func TestDeliveryOptionsOfARunFromAnIssue(t *testing.T) {
	t.Parallel()
	m := &Main{}
	m.Config.Git.Enabled = true
	m.Config.Git.Repo = "acme/app"
	m.Config.Git.PullRequest.Enabled = true
	m.Config.Surfaces.GitHub.Repo = "acme/app"
	o, ok := m.deliveryOptions(nil, runOptions{Issue: &issueOrigin{Repo: "acme/api", Number: 4, Closes: true}})
	if !ok || o.Repo != "acme/api" || o.RemoteRepo != "acme/api" || o.PullRequest == nil || o.PullRequest.Closes != "#4" {
		t.Errorf("from an issue of acme/api: %+v", o)
	}
	o, ok = m.deliveryOptions(nil, runOptions{})
	if !ok || o.Repo != "acme/app" || o.RemoteRepo != "" || o.PullRequest.Closes != "" {
		t.Errorf("another run: %+v", o)
	}
}
