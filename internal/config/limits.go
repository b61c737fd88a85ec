package config

import (
	"math"
	"time"
)

// Limits are caps on what all runs together may spend (issue 27): no turn
// starts past one, and a turn that would cross one gets --max-budget-usd
// for what is left. A run that reaches one parks with a question on its
// surfaces, Continue (raise the cap of that period by its amount, once) or
// Stop. A spec's own daily cap is its max_cost_usd_per_day.
type Limits struct {
	// CostUSDPerDay is what all runs together may spend in one day (in
	// Timezone), in US dollars; 0: no cap.
	CostUSDPerDay float64 `yaml:"cost_usd_per_day"`
	// CostUSDPerMonth is what all runs together may spend in one calendar
	// month (in Timezone), in US dollars; 0: no cap.
	CostUSDPerMonth float64 `yaml:"cost_usd_per_month"`
	// Timezone is where a day and a month of the caps begin: an IANA name
	// such as Europe/Berlin. Default: UTC.
	Timezone string `yaml:"timezone"`
}

// Location is the time zone of the caps' days and months (UTC when unset
// or not valid; Validate reports the latter).
func (l Limits) Location() *time.Location {
	if l.Timezone == "" {
		return time.UTC
	}
	loc, err := time.LoadLocation(l.Timezone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// validateLimits checks the limits section.
func (c *Config) validateLimits(add func(key, format string, args ...any)) {
	for _, k := range []struct {
		key string
		v   float64
	}{{"limits.cost_usd_per_day", c.Limits.CostUSDPerDay}, {"limits.cost_usd_per_month", c.Limits.CostUSDPerMonth}} {
		if k.v < 0 || math.IsInf(k.v, 0) || math.IsNaN(k.v) {
			add(k.key, "must be a positive amount of dollars, or 0 for no cap")
		}
	}
	if c.Limits.Timezone != "" {
		if _, err := time.LoadLocation(c.Limits.Timezone); err != nil {
			add("limits.timezone", "%q is not a time zone (want an IANA name such as Europe/Berlin, or UTC)", c.Limits.Timezone)
		}
	}
}
