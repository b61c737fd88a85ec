package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
)

// The orchestrator's secrets never reach the agent, whatever the variable
// carrying them is called (issue 21): with the real CLI, the model runs
// `env` through Bash and the fake API sees the tool's output. The GitHub
// token and webhook secret of the configuration sit in plainly named
// variables of the orchestrator's environment (GHX, HOOKS), PGPASSWORD is
// set, and the agent gets an empty gh config dir. agent.env naming the
// token is refused by validate, with the file and line.
func TestAgentEnvHoldsNoSecretOfTheOrchestrator(t *testing.T) {
	const (
		tok  = "ghp_e2eConfiguredToken0123456789abcdef"
		hook = "hook-secret-e2e-0123456789"
		pgpw = "pg-password-e2e-0123456789"
	)
	e := newE2E(t,
		fakeapi.Rule{When: "dump the env", Reply: fakeapi.Reply{Text: "Dumping it.", ToolUse: &fakeapi.ToolUse{
			Name: "Bash", Input: map[string]any{"command": "env", "description": "Print the environment"}}}, Times: 1},
		fakeapi.Rule{Respond: func(r fakeapi.Request) fakeapi.Reply {
			return fakeapi.Reply{Text: "ENV SEEN"}
		}},
	)
	e.base = strings.Replace(e.base, "  timeout: 2m\n", "  timeout: 2m\n  allowed_tools: [Bash]\n", 1)
	e.writeConfig("  github:\n    token: ${GH_TOKEN}\n    webhook_secret: ${HOOK_SECRET}\n")
	// The orchestrator's own environment, which the agent's is made from.
	t.Setenv("GHX", tok)
	t.Setenv("HOOKS", hook)
	t.Setenv("AUTH_HEADER", "Bearer "+tok)
	t.Setenv("PGPASSWORD", pgpw)
	t.Setenv("GH_TOKEN", tok)
	lookup := func(k string) (string, bool) {
		switch k {
		case "GH_TOKEN":
			return tok, true
		case "HOOK_SECRET":
			return hook, true
		case "PGPASSWORD":
			return pgpw, true
		}
		return "", false
	}
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Dir: filepath.Join(e.dir, "work"), LookupEnv: lookup}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		code := m.Exec(ctx, append([]string{"--config", e.config}, args...))
		return code, out.String() + errb.String()
	}

	code, out := run("run", "--prompt", "dump the env", "--surface", "terminal")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	var env string
	for _, r := range e.fake.Requests() {
		env += strings.Join(r.ToolResults, "\n")
	}
	if !strings.Contains(env, "PATH=") {
		t.Fatalf("the fake API got no env dump: %.300q", env)
	}
	for name, secret := range map[string]string{"the GitHub token": tok, "the webhook secret": hook, "PGPASSWORD": pgpw} {
		if strings.Contains(env, secret) {
			t.Errorf("the agent's environment holds %s", name)
		}
	}
	for _, name := range []string{"GHX=", "HOOKS=", "AUTH_HEADER=", "GH_TOKEN=", "PGPASSWORD="} {
		if strings.Contains(env, "\n"+name) || strings.HasPrefix(env, name) {
			t.Errorf("the agent's environment has %s", name)
		}
	}
	if want := "GH_CONFIG_DIR=" + filepath.Join(e.state, "agent-gh"); !strings.Contains(env, want) {
		t.Errorf("the agent's environment lacks %s", want)
	}

	// agent.env: {X: ${GH_TOKEN}} is refused, naming the file and line.
	e.base = strings.Replace(e.base, "  env:\n", "  env:\n    X: ${GH_TOKEN}\n", 1)
	e.writeConfig("  github:\n    token: ${GH_TOKEN}\n    webhook_secret: ${HOOK_SECRET}\n")
	code, out = run("validate")
	if code == 0 || !strings.Contains(out, filepath.Base(e.config)+":7: agent.env.X: holds the value of surfaces.github.token") {
		t.Errorf("validate with agent.env X: ${GH_TOKEN}: exit %d\n%s", code, out)
	}
	if strings.Contains(out, tok) {
		t.Error("validate shows the token")
	}
}
