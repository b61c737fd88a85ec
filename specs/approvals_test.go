package specs

import (
	"strings"
	"testing"
	"time"
)

func TestParseApprovals(t *testing.T) {
	s, err := Parse("a.md", []byte("---\nname: a\napprovals:\n  allow: [\"Bash(go test:*)\"]\n  deny:\n    - \"Bash(git push:*)\"\n  approval_hold: 0\n---\nDo it.\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := s.Sections.Approvals
	if a == nil || len(a.Allow) != 1 || a.Allow[0] != "Bash(go test:*)" || len(a.Deny) != 1 || a.Hold == nil || *a.Hold != 0 {
		t.Fatalf("approvals %+v", a)
	}
	s, err = Parse("b.md", []byte("---\nname: b\napprovals:\n  approval_hold: 2h\n---\nDo it.\n"))
	if err != nil || s.Sections.Approvals == nil || s.Sections.Approvals.Hold.Std() != 2*time.Hour {
		t.Fatalf("hold: %+v %v", s.Sections.Approvals, err)
	}
	if s, _ := Parse("c.md", []byte("---\nname: c\n---\nDo it.\n")); s.Sections.Approvals != nil {
		t.Errorf("no section: %+v", s.Sections.Approvals)
	}
}

func TestParseApprovalsErrors(t *testing.T) {
	for src, want := range map[string]string{
		"approvals: yes\n":                    "approvals: want a mapping",
		"approvals:\n  allow: [\"Bash(x\"]\n": "approvals.allow[0]",
		"approvals:\n  maybe: []\n":           "approvals.maybe: unknown key",
		"approvals:\n  approval_hold: soon\n": "approvals.approval_hold",
		"approvals:\n  ask: [\"rm -rf\"]\n":   "approvals.ask[0]",
	} {
		_, err := Parse("x.md", []byte("---\nname: x\n"+src+"---\nDo it.\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to name %q", src, err, want)
		}
	}
}
