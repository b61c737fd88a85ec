package runner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// TestOnTimeoutPromptText checks the exact text each on_timeout action hands
// the model, as it reaches the API (docs/specs.md "When nobody answers:
// `on_timeout`" quotes it).
func TestOnTimeoutPromptText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		action, option string
		want           string // the answer's part of the prompt
	}{
		{"default", "JWT", "Question 1 (%ID) [Auth]: Which auth method?\nChosen: JWT\nAnswer in their own words:\n" +
			"    Nobody answered within 300ms, so the spec's default option \"JWT\" was chosen for them (on_timeout: default). Go on with it, and say in your reply that the default was used.\n"},
		{"decide", "", "Question 1 (%ID) [Auth]: Which auth method?\nAnswer in their own words:\n" +
			"    Nobody answered within 300ms (on_timeout: decide). Decide yourself, go on with the task, and say in your reply what you decided and why.\n"},
		{"skip", "", "Question 1 (%ID) [Auth]: Which auth method?\nAnswer in their own words:\n" +
			"    Nobody answered within 300ms (on_timeout: skip). Do not do what depends on this answer: leave it out, go on with the rest of the task, and say in your reply what you left out.\n"},
		{"default", "Basic auth", "Question 1 (%ID) [Auth]: Which auth method?\nAnswer in their own words:\n" +
			"    Nobody answered within 300ms (on_timeout: decide). Decide yourself, go on with the task, and say in your reply what you decided and why.\n"},
	} {
		t.Run(tc.action+"/"+tc.option, func(t *testing.T) {
			t.Parallel()
			p := newPerson("test")
			pol := runner.Policy{QuestionTimeout: 300 * time.Millisecond, OnTimeout: runner.OnTimeout{Action: tc.action, Option: tc.option}}
			h := newHarness(t, []surfaces.Surface{p}, pol, runner.Limits{}, rules()...)
			run, err := h.drive("Implement spec X")
			if err != nil || run.Status != store.RunDone {
				t.Fatalf("run = %s %q %q, %v", run.Status, run.FinalText, run.Error, err)
			}
			sent := h.answersSent()
			if len(sent) != 1 {
				t.Fatalf("answers sent: %q", sent)
			}
			head := "Your questions were answered by nobody (no answer within 300ms; on_timeout: " + tc.action + ") via timeout at "
			if !strings.Contains(sent[0], "\n"+head) {
				t.Fatalf("prompt = %q, want a line starting %q", sent[0], head)
			}
			i := strings.Index(sent[0], "Question 1 (")
			if i < 0 {
				t.Fatalf("prompt = %q", sent[0])
			}
			id := sent[0][i+len("Question 1 (") : i+len("Question 1 (")+5]
			if want := strings.ReplaceAll(tc.want, "%ID", id); !strings.Contains(sent[0], want) {
				t.Fatalf("prompt =\n%s\nwant it to hold\n%s", sent[0], want)
			}
		})
	}
}

// TestOnTimeoutDefaultIsMarked: people see which option on_timeout default
// will choose.
func TestOnTimeoutDefaultIsMarked(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	pol := runner.Policy{QuestionTimeout: 300 * time.Millisecond, OnTimeout: runner.OnTimeout{Action: "default", Option: "JWT"}}
	h := newHarness(t, []surfaces.Surface{p}, pol, runner.Limits{}, rules()...)
	run, err := h.drive("Implement spec X")
	if err != nil || run.Status != store.RunDone {
		t.Fatalf("run = %s %q %q, %v", run.Status, run.FinalText, run.Error, err)
	}
	sets, _ := h.store.QuestionSets(context.Background(), store.SetFilter{RunID: run.ID})
	if len(sets) != 1 {
		t.Fatalf("sets = %+v", sets)
	}
	opts := sets[0].Set.Questions[0].Options
	if opts[0].Description != "Use OAuth2" || opts[1].Description != "Stateless (chosen if nobody answers within 300ms)" {
		t.Fatalf("options = %+v; want JWT marked as the default", opts)
	}
}
