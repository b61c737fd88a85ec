package config

import (
	"strings"
	"testing"
	"time"
)

func TestApprovals(t *testing.T) {
	c, err := ParseEnv(strings.NewReader("approvals:\n  allow: [\"Bash(go test:*)\"]\n  deny: [\"Bash(git push:*)\"]\n  approval_hold: 0\n"), "c.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Approvals.Allow) != 1 || len(c.Approvals.Deny) != 1 || c.Approvals.Hold != 0 {
		t.Errorf("approvals %+v", c.Approvals)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
	if d := DefaultEnv(env("HOME", "/h")); d.Approvals.Hold.Std() != 10*time.Minute {
		t.Errorf("default hold %s", d.Approvals.Hold)
	}
	c, err = ParseEnv(strings.NewReader("approvals:\n  ask: [\"Bash(\"]\n"), "c.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "approvals.ask[0]") {
		t.Errorf("a bad rule: %v", err)
	}
}
