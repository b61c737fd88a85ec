package config

import (
	"strings"
	"testing"
)

func TestReviewTrigger(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		on      bool
		mention string
	}{
		{"", false, "@orchestrator"},
		{"triggers:\n  github:\n    enabled: true\n", true, "@orchestrator"},
		{"triggers:\n  github:\n    enabled: true\n    review: false\n", false, "@orchestrator"},
		{"triggers:\n  github:\n    enabled: true\n    mention: \"@bot\"\n", true, "@bot"},
	} {
		cfg, err := ParseEnv(strings.NewReader(tc.in), "t.yaml", env("HOME", "/h"))
		if err != nil {
			t.Fatal(err)
		}
		if on, mention := cfg.ReviewTrigger(); on != tc.on || mention != tc.mention {
			t.Errorf("%q: on %v mention %q; want %v %q", tc.in, on, mention, tc.on, tc.mention)
		}
	}
}
