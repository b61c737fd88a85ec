package config

import "time"

// Rules bounds the remembered decisions people keep when they answer
// (`answer --remember spec:7d`; docs/rules.md).
type Rules struct {
	// MaxLifetime is the longest a rule lasts; a rule asked for without a
	// lifetime lasts this long. Default: 30d.
	MaxLifetime Duration `yaml:"max_lifetime"`
	// SuggestAfter is how many times in a row the same question must have
	// been answered the same way in a spec's runs, with no rule, for its
	// next asking to suggest keeping the answer as a rule; 0 never
	// suggests. Default: 5.
	SuggestAfter int `yaml:"suggest_after"`
}

// DefaultRuleMaxLifetime is rules.max_lifetime's default.
const DefaultRuleMaxLifetime = Duration(30 * 24 * time.Hour)

// DefaultRuleSuggestAfter is rules.suggest_after's default.
const DefaultRuleSuggestAfter = 5

// validateRules checks the rules section.
func (c *Config) validateRules(add func(key, format string, args ...any)) {
	if c.Rules.MaxLifetime <= 0 {
		add("rules.max_lifetime", "must be more than zero, got %s", c.Rules.MaxLifetime)
	}
	if c.Rules.SuggestAfter < 0 {
		add("rules.suggest_after", "must not be negative (0 never suggests), got %d", c.Rules.SuggestAfter)
	}
}
