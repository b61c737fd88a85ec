package config

import (
	"strings"
	"testing"
)

// TestValidate_Notify: webhooks are https or loopback http, events are
// known ones, a secret signs them; each problem names its file, line and key.
func TestValidate_Notify(t *testing.T) {
	t.Parallel()
	y := "notify:\n" +
		"  surfaces: [failed, finished]\n" +
		"  webhooks:\n" +
		"    - url: http://hooks.example.com/x\n" +
		"    - url: http://127.0.0.1:9/hook\n" +
		"      events: [done, cap_reached]\n" +
		"    - url: https://ntfy.example.com/t\n" +
		"      events: [paused, nope]\n" +
		"serve:\n  pause_after_failures: -1\n"
	cfg, err := ParseEnv(strings.NewReader(y), "n.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range Errors(cfg.Validate()) {
		got = append(got, e.Error())
	}
	want := []string{
		`n.yaml:2: notify.surfaces[1]: unknown event "finished"`,
		"n.yaml:4: notify.webhooks[0].url: plain http only to a loopback address",
		`n.yaml:8: notify.webhooks[2].events[1]: unknown event "nope"`,
		"n.yaml:1: notify.secret: required with notify.webhooks",
		"n.yaml:10: serve.pause_after_failures: ",
	}
	if len(got) != len(want) {
		t.Fatalf("errors = %q", got)
	}
	all := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("no error %q in\n%s", w, all)
		}
	}
	if strings.Contains(all, "hooks.example.com") {
		t.Errorf("a URL is shown: %s", all)
	}

	cfg, err = ParseEnv(strings.NewReader("notify:\n  secret: ${NOTIFY_SECRET}\n  webhooks:\n    - url: https://hooks.example.com/x\n"),
		"ok.yaml", env("HOME", "/h", "NOTIFY_SECRET", "a-long-enough-secret"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Serve.PauseAfterFailures != DefaultPauseAfterFailures || cfg.Notify.WaitingAfter != DefaultWaitingAfter {
		t.Errorf("defaults = %d, %v", cfg.Serve.PauseAfterFailures, cfg.Notify.WaitingAfter)
	}
	found := false
	for _, s := range cfg.Secrets() {
		found = found || (s.Key == "notify.secret" && s.Value == "a-long-enough-secret")
	}
	if !found {
		t.Errorf("notify.secret is not among the secrets: %v", cfg.Secrets())
	}
}
