package config

import (
	"strings"
	"testing"
)

func TestLimitsValidate(t *testing.T) {
	src := "limits:\n  cost_usd_per_day: -1\n  cost_usd_per_month: 10\n  timezone: Mars/Olympus\n"
	c, err := ParseEnv(strings.NewReader(src), "orchestrator.yaml", exampleEnv)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	if err == nil {
		t.Fatal("no error for a negative cap and an unknown time zone")
	}
	for _, want := range []string{"orchestrator.yaml:2: limits.cost_usd_per_day", "orchestrator.yaml:4: limits.timezone", "Mars/Olympus"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "cost_usd_per_month") {
		t.Errorf("a valid cost_usd_per_month is reported: %v", err)
	}
	if c.Limits.Location().String() != "UTC" {
		t.Errorf("an invalid time zone's Location = %s, want UTC", c.Limits.Location())
	}
	c.Limits.Timezone = "Europe/Berlin"
	if c.Limits.Location().String() != "Europe/Berlin" {
		t.Errorf("Location = %s", c.Limits.Location())
	}
}
