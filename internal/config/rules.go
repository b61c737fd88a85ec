package config

import "time"

// Rules bounds the remembered decisions people keep when they answer
// (`answer --remember spec:7d`; docs/rules.md).
type Rules struct {
	// MaxLifetime is the longest a rule lasts; a rule asked for without a
	// lifetime lasts this long. Default: 30d.
	MaxLifetime Duration `yaml:"max_lifetime"`
}

// DefaultRuleMaxLifetime is rules.max_lifetime's default.
const DefaultRuleMaxLifetime = Duration(30 * 24 * time.Hour)

// validateRules checks the rules section.
func (c *Config) validateRules(add func(key, format string, args ...any)) {
	if c.Rules.MaxLifetime <= 0 {
		add("rules.max_lifetime", "must be more than zero, got %s", c.Rules.MaxLifetime)
	}
}
