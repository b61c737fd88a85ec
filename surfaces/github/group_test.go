package github

import (
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
)

func TestAnswerAllFlag(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body, text string
		all        bool
	}{
		{"/answer q1 2 --all", "q1: 2", true},
		{"/answer q1 other: keep --all  ", "q1: other: keep", true},
		{"/answer q1 2", "q1: 2", false},
		{"/answer q1 --all-in 2", "q1: --all-in 2", false},
		{"> /answer q1 2 --all\nyes", "yes", false},
		{"2 --all", "2 --all", false}, // only the command takes the flag
	} {
		if got := answerText(c.body); got != c.text {
			t.Errorf("answerText(%q) = %q, want %q", c.body, got, c.text)
		}
		if got := wantsAll(c.body); got != c.all {
			t.Errorf("wantsAll(%q) = %v, want %v", c.body, got, c.all)
		}
	}
	if wantsAll("> /answer q1 2 --all") {
		t.Error("a quoted command answers for all")
	}
}

func TestGroupNote(t *testing.T) {
	t.Parallel()
	set := questions.Set{ID: "s1", Questions: []questions.Question{{ID: "q1", Text: "Go?"}},
		Group: []questions.GroupRun{{SetID: "s2", RunID: "r2", Spec: "@team-b"}}}
	n := groupNote(set)
	for _, want := range []string{"also waits in 1 other run", "`/answer q1 ANSWER --all`"} {
		if !strings.Contains(n, want) {
			t.Errorf("note %q lacks %q", n, want)
		}
	}
	if strings.Contains(n, "@team") {
		t.Errorf("note %q mentions a team", n)
	}
	set.Group = nil
	if n := groupNote(set); n != "" {
		t.Errorf("note without a group: %q", n)
	}
}
