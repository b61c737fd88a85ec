package fakeapi

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRehearsal(t *testing.T) {
	t.Parallel()
	first := rehearse(Request{LastUserText: "Add a login page", Messages: []Message{
		{Role: "user", Content: []Block{{Type: "text", Text: "Add a login page"}}},
	}})
	if first.Status != 0 || first.ToolUse != nil {
		t.Fatalf("first reply = %+v, want text only", first)
	}
	if n := strings.Count(first.Text, markerPrefix); n != 1 {
		t.Fatalf("first reply has %d markers, want 1:\n%s", n, first.Text)
	}
	_, after, _ := strings.Cut(first.Text, markerPrefix)
	payload, _, ok := strings.Cut(after, "-->")
	if !ok {
		t.Fatalf("unterminated marker:\n%s", first.Text)
	}
	var m struct {
		Questions []struct {
			Question string
			Header   string
			Options  []struct{ Label, Description string }
		}
	}
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		t.Fatalf("marker payload %q: %v", payload, err)
	}
	if len(m.Questions) != 1 {
		t.Fatalf("%d questions, want 1", len(m.Questions))
	}
	q := m.Questions[0]
	if q.Question == "" || q.Header != "Approach" || len(q.Options) < 2 || len(q.Options) > 3 {
		t.Fatalf("question = %+v", q)
	}
	for _, o := range q.Options {
		if o.Label == "" || o.Description == "" {
			t.Errorf("option %+v lacks a label or description", o)
		}
	}

	asked := []Message{
		{Role: "user", Content: []Block{{Type: "text", Text: "Add a login page"}}},
		{Role: "assistant", Content: []Block{{Type: "text", Text: first.Text}}},
	}
	tests := []struct {
		name   string
		answer string
		want   string
	}{
		{"exact label", q.Options[0].Label, "Done. Implemented using " + q.Options[0].Label + "."},
		{"label in a sentence, other case", "Answer to Approach: " + strings.ToUpper(q.Options[1].Label) + ", please", "Done. Implemented using " + q.Options[1].Label + "."},
		{"last named wins", "Not " + q.Options[0].Label + " but " + q.Options[2].Label, "Done. Implemented using " + q.Options[2].Label + "."},
		{"free text", "Use magic links\nand nothing else", "Done. Implemented as you said: “Use magic links”."},
		{"long free text", strings.Repeat("x", 100), "Done. Implemented as you said: “" + strings.Repeat("x", 80) + "…”."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msgs := append(append([]Message(nil), asked...), Message{Role: "user", Content: []Block{{Type: "text", Text: tt.answer}}})
			got := rehearse(Request{LastUserText: tt.answer, Messages: msgs})
			if got.Text != tt.want {
				t.Errorf("reply = %q, want %q", got.Text, tt.want)
			}
		})
	}
}

// TestRehearsalRules checks Rehearsal through the server: the rules answer
// any request.
func TestRehearsalRules(t *testing.T) {
	t.Parallel()
	rules := Rehearsal()
	if len(rules) == 0 || rules[0].When != "" || rules[0].Times != 0 || rules[0].Respond == nil {
		t.Fatalf("Rehearsal() = %+v, want a catch-all Respond rule", rules)
	}
	if q := RehearsalQuestion(); len(q.Options) == 0 {
		t.Fatal("RehearsalQuestion has no options")
	}
}
