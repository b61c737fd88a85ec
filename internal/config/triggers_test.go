package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestValidate_Triggers(t *testing.T) {
	t.Parallel()
	in := "surfaces:\n  github:\n    enabled: true\n    token: t\n    repo: acme/webapp\ntriggers:\n  github:\n    enabled: true\n    repos: [acme/webapp, nope]\n    mention: \"\"\n    labels: [\"\"]\n    spec: a/b\n    max_runs_per_hour: 0\n"
	cfg, err := ParseEnv(strings.NewReader(in), "t.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(Errors(cfg.Validate()))
	for _, w := range []string{
		`t.yaml:9: triggers.github.repos[1]: want owner/name, got "nope"`,
		`t.yaml:10: triggers.github.mention: want one word`,
		`t.yaml:11: triggers.github.labels[0]: must not be empty`,
		`t.yaml:12: triggers.github.spec: want the name of a spec`,
		`t.yaml:13: triggers.github.max_runs_per_hour: must be at least 1, got 0`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("errors %s\nwant %q", got, w)
		}
	}

	ok := "surfaces:\n  github:\n    enabled: true\n    token: t\n    repo: acme/webapp\ntriggers:\n  github:\n    enabled: true\n    labels: [orchestrator]\n"
	cfg, err = ParseEnv(strings.NewReader(ok), "t.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults with surfaces.github.repo: %v", err)
	}
	g := cfg.Triggers.GitHub
	if g.Mention != "@orchestrator" || g.Spec != "issue" || g.MaxRunsPerHour != 10 || !g.Closes || !g.Review {
		t.Errorf("defaults: %+v", g)
	}
	if r := cfg.TriggerRepos(); len(r) != 1 || r[0] != "acme/webapp" {
		t.Errorf("TriggerRepos = %v, want surfaces.github.repo", r)
	}

	off := "triggers:\n  github:\n    enabled: true\n"
	cfg, err = ParseEnv(strings.NewReader(off), "t.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(Errors(cfg.Validate())); !strings.Contains(got, "t.yaml:3: triggers.github.enabled: needs surfaces.github enabled") {
		t.Errorf("without the surface: %s", got)
	}
}

func TestValidate_SlackTriggers(t *testing.T) {
	t.Parallel()
	in := "triggers:\n  slack:\n    enabled: true\n    mention: \"two words\"\n    spec: a/b\n    max_runs_per_hour: 0\n"
	cfg, err := ParseEnv(strings.NewReader(in), "t.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(Errors(cfg.Validate()))
	for _, w := range []string{
		`t.yaml:3: triggers.slack.enabled: needs surfaces.slack enabled with an app_token or a signing_secret`,
		`t.yaml:4: triggers.slack.mention: want one word`,
		`t.yaml:5: triggers.slack.spec: want the name of a spec`,
		`t.yaml:6: triggers.slack.max_runs_per_hour: must be at least 1, got 0`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("errors %s\nwant %q", got, w)
		}
	}

	ok := "surfaces:\n  slack:\n    enabled: true\n    bot_token: xoxb-1\n    app_token: xapp-1\n    channel: C0FAKE0001\n    allow_users: [U0ALICE001]\ntriggers:\n  slack:\n    enabled: true\n"
	cfg, err = ParseEnv(strings.NewReader(ok), "t.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults with surfaces.slack: %v", err)
	}
	if s := cfg.Triggers.Slack; s.Mention != "" || s.Spec != "slack" || s.MaxRunsPerHour != 10 {
		t.Errorf("defaults: %+v", s)
	}

	// Without Socket Mode, mentions come over the Events API (HTTP).
	overHTTP := strings.Replace(ok, "app_token: xapp-1", "signing_secret: 8f742231b10e8888abcd99yyyzzz85a5", 1)
	cfg, err = ParseEnv(strings.NewReader(overHTTP), "t.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("signing_secret without app_token: %v", err)
	}
}

// TestValidate_TriggerRepoSettings: an entry of triggers.github.repos is
// owner/name or a mapping whose keys override the defaults for that
// repository; a bad entry is named by file, line and key.
func TestValidate_TriggerRepoSettings(t *testing.T) {
	t.Parallel()
	ok := "surfaces:\n  github:\n    enabled: true\n    token: t\n    repo: acme/webapp\ntriggers:\n  github:\n    enabled: true\n    labels: [orchestrator]\n" +
		"    repos:\n      - acme/webapp\n      - repo: acme/api\n        spec: api\n        labels: [agent]\n        mention: \"@bot\"\n      - {repo: acme/docs, labels: []}\n"
	cfg, err := ParseEnv(strings.NewReader(ok), "t.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.TriggerRepos(), ","); got != "acme/webapp,acme/api,acme/docs" {
		t.Errorf("TriggerRepos = %s", got)
	}
	for _, c := range []struct {
		repo, key, spec, labels, mention string
	}{
		{"acme/webapp", "triggers.github.repos[0]", "issue", "orchestrator", "@orchestrator"},
		{"ACME/api", "triggers.github.repos[1]", "api", "agent", "@bot"},
		{"acme/docs", "triggers.github.repos[2]", "issue", "", "@orchestrator"},
		{"acme/other", "", "issue", "orchestrator", "@orchestrator"},
	} {
		s, key := cfg.TriggerRepoSettings(c.repo)
		if key != c.key || s.Spec != c.spec || strings.Join(s.Labels, ",") != c.labels || s.Mention != c.mention {
			t.Errorf("TriggerRepoSettings(%s) = %+v, %q; want spec %s labels %q mention %s key %q", c.repo, s, key, c.spec, c.labels, c.mention, c.key)
		}
	}
	if cfg.Line("triggers.github.repos[1].spec") != 13 {
		t.Errorf("line of repos[1].spec = %d, want 13", cfg.Line("triggers.github.repos[1].spec"))
	}

	bad := "surfaces:\n  github:\n    enabled: true\n    token: t\n    repo: acme/webapp\ntriggers:\n  github:\n    enabled: true\n    repos:\n" +
		"      - repo: acme/api\n        spce: api\n" + // 10, 11
		"      - spec: x\n" + // 12
		"      - {repo: nope, spec: a/b}\n" + // 13
		"      - repo: acme/web\n        labels: [\"\"]\n        mention: two words\n" + // 14-16
		"      - [acme/x]\n" + // 17
		"      - acme/API\n" // 18
	_, err = ParseEnv(strings.NewReader(bad), "t.yaml", env("HOME", "/h"))
	got := fmt.Sprint(Errors(err))
	for _, w := range []string{
		`t.yaml:11: triggers.github.repos[0].spce: unknown key (did you mean "spec"?)`,
		`t.yaml:12: triggers.github.repos[1].repo: required`,
		`t.yaml:17: triggers.github.repos[4]: `,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("decoding errors %s\nwant %q", got, w)
		}
	}
	bad2 := "surfaces:\n  github:\n    enabled: true\n    token: t\n    repo: acme/webapp\ntriggers:\n  github:\n    enabled: true\n    repos:\n" +
		"      - {repo: nope, spec: a/b}\n" + // 10
		"      - repo: acme/web\n        labels: [\"\"]\n        mention: two words\n" + // 11-13
		"      - acme/WEB\n" // 14
	cfg, err = ParseEnv(strings.NewReader(bad2), "t.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	got = fmt.Sprint(Errors(cfg.Validate()))
	for _, w := range []string{
		`t.yaml:10: triggers.github.repos[0]: want owner/name, got "nope"`,
		`t.yaml:12: triggers.github.repos[1].labels[0]: must not be empty`,
		`t.yaml:13: triggers.github.repos[1].mention: want one word`,
		`t.yaml:14: triggers.github.repos[2]: acme/WEB is listed twice (first at triggers.github.repos[1])`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("errors %s\nwant %q", got, w)
		}
	}
}
