package questions

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestFingerprint(t *testing.T) {
	t.Parallel()
	q := func(text string, opts ...string) Question {
		qu := Question{Text: text}
		for _, o := range opts {
			qu.Options = append(qu.Options, Option{Label: o})
		}
		return qu
	}
	base := NewSet("run-a", 1, []Question{q("Upgrade to pgx v5?", "Yes", "No")})
	approval := func(run, tool, input string) Set {
		return NewToolSet(run, 1, KindApproval, ToolCall{ToolUseID: "toolu_" + run, Tool: tool, Input: json.RawMessage(input)},
			[]Question{q("Allow?", AllowOnce, AllowForRun, Deny)})
	}
	same := []struct {
		name string
		a, b Set
	}{
		{"other run", base, NewSet("run-b", 3, []Question{q("Upgrade to pgx v5?", "Yes", "No")})},
		{"case and whitespace", base, NewSet("run-b", 1, []Question{q("  upgrade TO\n pgx   v5? ", "yes", " NO")})},
		{"header and description", base, NewSet("run-b", 1, []Question{{Text: "Upgrade to pgx v5?", Header: "deps",
			Options: []Option{{Label: "Yes", Description: "now"}, {Label: "No"}}}})},
		{"approval input key order", approval("a", "Bash", `{"command":"go test ./...","timeout":5}`),
			approval("b", "Bash", `{ "timeout": 5, "command": "go test ./..." }`)},
	}
	for _, c := range same {
		fa, fb := Fingerprint(c.a), Fingerprint(c.b)
		if fa == "" || fa != fb {
			t.Errorf("%s: fingerprints %q and %q, want equal and not empty", c.name, fa, fb)
		}
	}
	differ := []struct {
		name string
		a, b Set
	}{
		{"text", base, NewSet("run-b", 1, []Question{q("Upgrade to pgx v4?", "Yes", "No")})},
		{"option order", base, NewSet("run-b", 1, []Question{q("Upgrade to pgx v5?", "No", "Yes")})},
		{"more options", base, NewSet("run-b", 1, []Question{q("Upgrade to pgx v5?", "Yes", "No", "Later")})},
		{"multi-select", base, NewSet("run-b", 1, []Question{{Text: "Upgrade to pgx v5?", MultiSelect: true,
			Options: []Option{{Label: "Yes"}, {Label: "No"}}}})},
		{"free text", base, NewSet("run-b", 1, []Question{{Text: "Upgrade to pgx v5?", FreeText: true,
			Options: []Option{{Label: "Yes"}, {Label: "No"}}}})},
		{"a second question", base, NewSet("run-b", 1, []Question{q("Upgrade to pgx v5?", "Yes", "No"), q("Why?")})},
		{"label split differently", NewSet("a", 1, []Question{q("x", "ab", "c")}), NewSet("b", 1, []Question{q("x", "a", "bc")})},
		{"approval input", approval("a", "Bash", `{"command":"go test ./..."}`), approval("b", "Bash", `{"command":"go test ./x"}`)},
		{"approval tool", approval("a", "Bash", `{"command":"ls"}`), approval("b", "Shell", `{"command":"ls"}`)},
		{"kind", func() Set { s := base; s.Kind = KindAskTool; return s }(), base},
	}
	for _, c := range differ {
		if fa, fb := Fingerprint(c.a), Fingerprint(c.b); fa == fb {
			t.Errorf("%s: both fingerprints %q, want different", c.name, fa)
		}
	}
	for _, kind := range []string{KindSecrets, KindLimit} {
		s := base
		s.Kind = kind
		if f := Fingerprint(s); f != "" {
			t.Errorf("a %s set has fingerprint %q, want none", kind, f)
		}
	}
	if f := Fingerprint(Set{ID: "s", RunID: "r"}); f != "" {
		t.Errorf("a set without questions has fingerprint %q", f)
	}
}

func TestForSet(t *testing.T) {
	t.Parallel()
	qs := []Question{{Text: "A?", Options: []Option{{Label: "x"}, {Label: "y"}}}, {Text: "B?"}}
	from, to := NewSet("run-a", 1, qs), NewSet("run-b", 2, qs)
	resp := Response{SetID: from.ID, By: "alice", Surface: "cli", Answers: []Answer{
		{QuestionID: from.Questions[1].ID, Text: "because"}, {QuestionID: from.Questions[0].ID, Labels: []string{"y"}}, {QuestionID: "nope"}}}
	got := ForSet(from, to, resp)
	if got.SetID != to.ID || got.By != "alice" || len(got.Answers) != 2 ||
		got.Answers[0].QuestionID != to.Questions[1].ID || got.Answers[1].QuestionID != to.Questions[0].ID || got.Answers[1].Labels[0] != "y" {
		t.Fatalf("ForSet = %+v", got)
	}
}

func TestGroupNote(t *testing.T) {
	t.Parallel()
	s := Set{Group: []GroupRun{{RunID: "r2", Spec: "nightly-b"}, {RunID: "r3"}}}
	if got, want := GroupNote(s), "This question also waits in 2 other runs: nightly-b (run r2), run r3."; got != want {
		t.Errorf("GroupNote = %q, want %q", got, want)
	}
	s.Group = s.Group[:1]
	if got, want := GroupNote(s), "This question also waits in 1 other run: nightly-b (run r2)."; got != want {
		t.Errorf("GroupNote = %q, want %q", got, want)
	}
	s.GroupMore = true
	if got := GroupNote(s); !strings.HasPrefix(got, "This question also waits in 1 or more other runs:") {
		t.Errorf("GroupNote = %q", got)
	}
	for i := 0; i < GroupShown; i++ {
		s.Group = append(s.Group, GroupRun{RunID: "rx"})
	}
	if got := GroupNote(s); strings.Count(got, "run rx") != 4 || !strings.HasSuffix(got, "….") {
		t.Errorf("GroupNote names %q; want five runs, then …", got)
	}
}
