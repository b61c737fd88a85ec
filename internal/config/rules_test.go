package config

import (
	"strings"
	"testing"
)

func TestRulesValidation(t *testing.T) {
	t.Parallel()
	c, err := ParseEnv(strings.NewReader("rules:\n  max_lifetime: 7d\n  suggest_after: 0\n"), "f.yaml", env())
	if err != nil || c.Rules.MaxLifetime.Std().Hours() != 7*24 || c.Rules.SuggestAfter != 0 {
		t.Fatalf("rules = %+v, %v", c.Rules, err)
	}
	if d := DefaultEnv(env()); d.Rules.MaxLifetime != DefaultRuleMaxLifetime || d.Rules.SuggestAfter != DefaultRuleSuggestAfter {
		t.Errorf("defaults = %+v", d.Rules)
	}
	c, err = ParseEnv(strings.NewReader("rules:\n  max_lifetime: 0s\n  suggest_after: -2\n"), "f.yaml", env())
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	for _, want := range []string{"f.yaml:2: rules.max_lifetime: must be more than zero", "f.yaml:3: rules.suggest_after: must not be negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}
