package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/secretscan"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestSurfaceSecrets: the token shapes and environment prefixes each
// surface declares in its table row are hidden everywhere text is printed
// or posted (questions.Redact, the delivery's secretscan.Redact), and the
// agent inherits no variable of the surface (agentDropEnv).
func TestSurfaceSecrets(t *testing.T) {
	t.Parallel()
	var base []string
	for _, k := range surfaceKinds {
		for _, tok := range k.tokenSamples {
			line := "the token is " + tok + " here"
			if got := questions.Redact(line); strings.Contains(got, tok) {
				t.Errorf("%s: questions.Redact leaves a token of its shape: %q", k.name, got)
			}
			if got := secretscan.Redact(line); strings.Contains(got, tok) {
				t.Errorf("%s: secretscan.Redact leaves a token of its shape: %q", k.name, got)
			}
		}
		for _, p := range k.envPrefixes {
			base = append(base, p+"SOME_SETTING=x")
		}
	}
	base = append(base, "PATH=/bin")
	ex, err := executor.New(executor.Config{Command: "claude", DropEnv: agentDropEnv(), BaseEnv: base})
	if err != nil {
		t.Fatal(err)
	}
	if env := ex.Environ(); !slices.Equal(env, []string{"PATH=/bin"}) {
		t.Errorf("the agent's environment = %v, want no variable of a surface", env)
	}
	if !slices.Contains(agentDropEnv(), "SLACK_*") {
		t.Errorf("agentDropEnv = %v, want SLACK_*", agentDropEnv())
	}
}
