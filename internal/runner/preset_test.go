package runner

import (
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestPresetAnswer: a preset answers a question whose header or text equals
// its Match, ignoring case and surrounding space; the first match wins.
// (Moved from specs, whose copy of this rule only the tests used.)
func TestPresetAnswer(t *testing.T) {
	t.Parallel()
	presets := []Preset{{Match: "Database", Answer: "PostgreSQL"}, {Match: "Which license?", Answer: "MIT"}}
	tests := []struct {
		header, text string
		want         string
		ok           bool
	}{
		{"database", "Which database should I use?", "PostgreSQL", true},
		{"", "  which LICENSE? ", "MIT", true},
		{"License", "Which licence?", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		set := questions.Set{ID: "s", Questions: []questions.Question{{ID: "q1", Header: tt.header, Text: tt.text}}}
		resp := presetResponse(set, presets, time.Unix(0, 0))
		got, ok := resp.Answer("q1")
		if ok != tt.ok || got.Text != tt.want {
			t.Errorf("preset for (%q, %q) = %q, %v; want %q, %v", tt.header, tt.text, got.Text, ok, tt.want, tt.ok)
		}
	}
}
