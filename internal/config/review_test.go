package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestReviewTrigger(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		on      bool
		mention string
		err     string
	}{
		{"", false, "@orchestrator", ""},
		{"triggers:\n  github:\n    enabled: true\n", true, "@orchestrator", ""},
		{"triggers:\n  github:\n    enabled: true\n    review: false\n", false, "@orchestrator", ""},
		{"triggers:\n  github:\n    enabled: true\n    mention: \"@bot\"\n", true, "@bot", ""},
		{"triggers:\n  github:\n    enabled: true\n    mention: \"please do\"\n", true, "please do", `t.yaml:4: triggers.github.mention: want one @word`},
		{"triggers:\n  github:\n    mention: \"  \"\n", false, "@orchestrator", `t.yaml:3: triggers.github.mention: must not be blank`},
	} {
		cfg, err := ParseEnv(strings.NewReader(tc.in), "t.yaml", env("HOME", "/h"))
		if err != nil {
			t.Fatal(err)
		}
		on, mention := cfg.ReviewTrigger()
		got := fmt.Sprint(Errors(cfg.Validate()))
		if on != tc.on || mention != tc.mention || (tc.err == "") != (got == "[]") || !strings.Contains(got, tc.err) {
			t.Errorf("%q: on %v mention %q, errors %s; want %v %q %q", tc.in, on, mention, got, tc.on, tc.mention, tc.err)
		}
	}
}
