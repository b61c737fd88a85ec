//go:build unix

package executor

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
)

// End-to-end tests: the REAL Claude Code CLI against the fake Messages API
// on 127.0.0.1. They skip when the CLI is not installed (and fail on CI);
// `make test` installs it. They are not parallel: each CLI process takes
// about 200 MB.

type e2e struct {
	t    *testing.T
	api  *fakeapi.Server
	env  map[string]string
	home string
	wd   string
}

func newE2E(t *testing.T, rules ...fakeapi.Rule) *e2e {
	t.Helper()
	clitest.Claude(t) // skip early when the CLI is missing
	api := fakeapi.New(rules...)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	env := clitest.Env(t, srv.URL)
	wd := filepath.Join(env["HOME"], "project")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	return &e2e{t: t, api: api, env: env, home: env["HOME"], wd: wd}
}

// executor builds an executor for the real CLI; only PATH, TMPDIR and the
// locale are inherited, so nothing of the developer's setup leaks in.
func (x *e2e) executor(mod func(*Config)) *Executor {
	x.t.Helper()
	var base []string
	for _, k := range []string{"PATH", "TMPDIR", "LANG", "LC_ALL", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			base = append(base, k+"="+v)
		}
	}
	cfg := Config{
		Command:       clitest.Claude(x.t),
		Env:           x.env,
		BaseEnv:       base,
		KillGrace:     10 * time.Second,
		TranscriptDir: filepath.Join(x.home, "transcripts"),
	}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		x.t.Fatal(err)
	}
	return e
}

func (x *e2e) run(e *Executor, req Request) ([]Event, Outcome) {
	x.t.Helper()
	if req.WorkDir == "" {
		req.WorkDir = x.wd
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return collect(x.t, ctx, e, req)
}

const questionText = "I need a decision.\n<!--QUESTION:{\"questions\":[{\"question\":\"Which auth method?\",\"header\":\"Auth\",\"options\":[{\"label\":\"OAuth2\"},{\"label\":\"JWT\"}]}]}-->"

func TestE2EQuestionThenResume(t *testing.T) {
	x := newE2E(t,
		fakeapi.Rule{When: "Implement spec X", Reply: fakeapi.Reply{Text: questionText}},
		fakeapi.Rule{When: "OAuth2", Reply: fakeapi.Reply{Text: "You chose OAuth2."}},
	)
	e := x.executor(func(c *Config) { c.AppendSystemPrompt = "ORCH-SYSTEM-MARKER-7" })
	_, o1 := x.run(e, Request{Prompt: "Implement spec X"})
	if o1.Status != StatusSuccess || o1.SessionID == "" || !strings.Contains(o1.FinalText, "<!--QUESTION:") {
		t.Fatalf("first turn: %+v", o1)
	}
	if o1.ExitCode != 0 || o1.NumTurns != 1 || o1.TranscriptPath == "" {
		t.Errorf("first turn exit %d turns %d transcript %q", o1.ExitCode, o1.NumTurns, o1.TranscriptPath)
	}
	_, o2 := x.run(e, Request{Prompt: "OAuth2", Resume: o1.SessionID})
	if o2.Status != StatusSuccess || o2.SessionID != o1.SessionID || o2.FinalText != "You chose OAuth2." {
		t.Fatalf("resumed turn: %+v", o2)
	}
	reqs := x.api.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d API requests, want 2", len(reqs))
	}
	carried := false
	for _, m := range reqs[1].Messages {
		if m.Role == "assistant" && strings.Contains(m.Text(), "I need a decision.") {
			carried = true
		}
	}
	if !carried {
		t.Error("the resumed request does not carry the first turn's assistant text")
	}
	if reqs[1].LastUserText != "OAuth2" {
		t.Errorf("resumed request's last user text %q", reqs[1].LastUserText)
	}
	for i, r := range reqs {
		if !strings.Contains(r.System, "ORCH-SYSTEM-MARKER-7") {
			t.Errorf("request %d: --append-system-prompt missing from the system prompt", i+1)
		}
	}
	for _, needle := range []string{"Implement spec X", "OAuth2"} {
		if ok, err := e.SessionTranscriptHas(o1.SessionID, needle); !ok || err != nil {
			t.Errorf("session file lacks %q: %v", needle, err)
		}
	}
	if ok, err := e.SessionTranscriptHas(o1.SessionID, "never said"); ok || err != nil {
		t.Errorf("session file search false positive: %v %v", ok, err)
	}
}

func TestE2EBashToolRoundTrip(t *testing.T) {
	x := newE2E(t,
		fakeapi.Rule{When: "run the echo", Reply: fakeapi.Reply{Text: "Running it.", ToolUse: &fakeapi.ToolUse{
			Name: "Bash", Input: map[string]any{"command": "echo hi-from-tool", "description": "Print a marker"}}}},
		fakeapi.Rule{When: "hi-from-tool", Reply: fakeapi.Reply{Text: "TOOL OK"}},
	)
	e := x.executor(func(c *Config) { c.AllowedTools = []string{"Bash(echo:*)"} })
	evs, o := x.run(e, Request{Prompt: "run the echo"})
	if o.Status != StatusSuccess || o.FinalText != "TOOL OK" || o.NumTurns != 2 {
		t.Fatalf("outcome %+v", o)
	}
	var toolUse, toolResult bool
	for _, ev := range evs {
		switch ev := ev.(type) {
		case *AssistantMessage:
			for _, tu := range ev.ToolUses() {
				toolUse = toolUse || tu.ToolName == "Bash"
			}
		case *UserMessage:
			for _, tr := range ev.ToolResults() {
				toolResult = toolResult || (!tr.IsError && strings.Contains(string(tr.Content), "hi-from-tool"))
			}
		}
	}
	if !toolUse || !toolResult {
		t.Errorf("tool_use seen %v, successful tool_result seen %v", toolUse, toolResult)
	}
	if len(o.PermissionDenials) != 0 {
		t.Errorf("denied: %q", o.PermissionDenials)
	}
}

func TestE2ERateLimit(t *testing.T) {
	x := newE2E(t, fakeapi.Rule{Reply: fakeapi.Reply{Status: 429, Text: "slow down"}})
	_, o := x.run(x.executor(nil), Request{Prompt: "hello"})
	if o.Status != StatusError || o.Category != CategoryRateLimit || o.ExitCode != 1 || o.APIErrorStatus != 429 {
		t.Fatalf("outcome %+v", o)
	}
}

func TestE2EResumeUnknownSession(t *testing.T) {
	x := newE2E(t)
	_, o := x.run(x.executor(nil), Request{Prompt: "hello", Resume: "00000000-0000-4000-8000-00000000abcd"})
	if o.Status != StatusError || o.Category != CategorySessionNotFound {
		t.Fatalf("outcome %+v", o)
	}
	if n := len(x.api.Requests()); n != 0 {
		t.Errorf("%d API requests for a missing session", n)
	}
}

func TestE2EMCPServerFails(t *testing.T) {
	x := newE2E(t)
	e := x.executor(func(c *Config) {
		c.MCPServers = map[string]any{"ghost": map[string]any{"command": filepath.Join(x.home, "no-such-mcp-server")}}
		c.StrictMCPConfig = true
	})
	_, o := x.run(e, Request{Prompt: "hello mcp"})
	if o.Status != StatusSuccess {
		t.Fatalf("outcome %+v", o)
	}
	if len(o.MCPServers) != 1 || o.MCPServers[0].Name != "ghost" || o.MCPServers[0].Status != "failed" {
		t.Errorf("mcp servers %+v", o.MCPServers)
	}
	warned := false
	for _, w := range o.Warnings {
		warned = warned || strings.Contains(w, `"ghost"`)
	}
	if !warned {
		t.Errorf("no warning about the failed server: %q", o.Warnings)
	}
}

// TestE2ECancelMidTurnThenResume also checks when the CLI writes the prompt
// to its session file: before the API has answered.
func TestE2ECancelMidTurnThenResume(t *testing.T) {
	x := newE2E(t,
		fakeapi.Rule{When: "slow-marker", Reply: fakeapi.Reply{Text: strings.Repeat("slow words ", 100), Chunks: 100, ChunkDelay: 500 * time.Millisecond}},
		fakeapi.Rule{When: "after-cancel", Reply: fakeapi.Reply{Text: "resumed fine"}},
	)
	e := x.executor(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	run, err := e.Start(runCtx, Request{Prompt: "slow-marker", WorkDir: x.wd})
	if err != nil {
		t.Fatal(err)
	}
	if !run.Next() {
		t.Fatalf("no first event: %+v", run.Outcome())
	}
	init, ok := run.Event().(*SystemInit)
	if !ok {
		t.Fatalf("first event %T", run.Event())
	}
	sid := init.SessionID()
	if _, err := x.api.WaitRequests(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The API has the request and will not answer for a while: the prompt
	// reaches the session file without any reply (measured: 0-100 ms after
	// the request arrives).
	deadline := time.Now().Add(30 * time.Second)
	for {
		has, err := e.SessionTranscriptHas(sid, "slow-marker")
		if has {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prompt not in the session file while the API call is in flight: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(x.api.Requests()); n != 1 {
		t.Fatalf("%d requests before the cancel", n)
	}
	cancelRun()
	for run.Next() {
	}
	o := run.Outcome()
	if o.Category != CategoryCancelled || o.Status != StatusError || o.SessionID != sid {
		t.Fatalf("cancelled run: %+v", o)
	}
	t.Logf("the CLI ended with exit code %d signal %q after SIGINT", o.ExitCode, o.Signal)

	_, o2 := x.run(e, Request{Prompt: "after-cancel", Resume: sid})
	if o2.Status != StatusSuccess || o2.SessionID != sid || o2.FinalText != "resumed fine" {
		t.Fatalf("resume after cancel: %+v", o2)
	}
	reqs := x.api.Requests()
	last := reqs[len(reqs)-1]
	sawPrompt := false
	for _, m := range last.Messages {
		sawPrompt = sawPrompt || (m.Role == "user" && strings.Contains(m.Text(), "slow-marker"))
	}
	if !sawPrompt {
		t.Error("the resumed request does not carry the cancelled turn's prompt")
	}
}

// bigPrompt is a 200 KiB prompt (over Linux's 128 KiB cap on one argument)
// that starts with "-" and ends with marker.
func bigPrompt(marker string) string {
	var b strings.Builder
	b.WriteString("- a prompt that starts with a dash\n")
	for b.Len() < 200<<10 {
		b.WriteString("Line of a long specification, with \"quotes\", tabs\tand unicode é.\n")
	}
	b.WriteString(marker)
	return b.String()
}

// TestE2ELargePromptOnStdin: a 200 KiB prompt reaches the API whole, in a
// new session and in a resumed one (it goes on the CLI's stdin).
func TestE2ELargePromptOnStdin(t *testing.T) {
	x := newE2E(t,
		fakeapi.Rule{When: "END-OF-FIRST", Reply: fakeapi.Reply{Text: "got the first"}},
		fakeapi.Rule{When: "END-OF-SECOND", Reply: fakeapi.Reply{Text: "got the second"}},
	)
	e := x.executor(nil)
	first, second := bigPrompt("END-OF-FIRST"), bigPrompt("END-OF-SECOND")
	if args := e.Args(Request{Prompt: first}); strings.Contains(strings.Join(args, " "), "END-OF-FIRST") {
		t.Fatal("a 200 KiB prompt is on the command line")
	}
	_, o1 := x.run(e, Request{Prompt: first})
	if o1.Status != StatusSuccess || o1.FinalText != "got the first" {
		t.Fatalf("first turn: %+v", o1)
	}
	_, o2 := x.run(e, Request{Prompt: second, Resume: o1.SessionID})
	if o2.Status != StatusSuccess || o2.SessionID != o1.SessionID || o2.FinalText != "got the second" {
		t.Fatalf("resumed turn: %+v", o2)
	}
	reqs := x.api.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d API requests, want 2", len(reqs))
	}
	for i, want := range []string{first, second} {
		if got := reqs[i].LastUserText; got != want {
			t.Errorf("request %d: the prompt arrived as %d bytes (want %d), prefix %.60q", i+1, len(got), len(want), got)
		}
	}
}

// TestE2ESecretEnvNotInherited: an AWS_SECRET_ACCESS_KEY in the
// orchestrator's environment is absent from the environment the real CLI
// gives its Bash tool, and present when Config.PassEnv lists it.
func TestE2ESecretEnvNotInherited(t *testing.T) {
	const secret = "AWS_SECRET_ACCESS_KEY=not-a-real-secret-e2e"
	for _, pass := range []bool{false, true} {
		x := newE2E(t,
			fakeapi.Rule{When: "PATH=", Reply: fakeapi.Reply{Text: "ENV SHOWN"}},
			fakeapi.Rule{When: "show the env", Reply: fakeapi.Reply{Text: "Showing it.", ToolUse: &fakeapi.ToolUse{
				Name: "Bash", Input: map[string]any{"command": "env", "description": "Print the environment"}}}},
		)
		e := x.executor(func(c *Config) {
			c.AllowedTools = []string{"Bash"}
			c.BaseEnv = append(c.BaseEnv, secret, "AWS_REGION=eu-west-1")
			if pass {
				c.PassEnv = []string{"AWS_SECRET_ACCESS_KEY"}
			}
		})
		_, o := x.run(e, Request{Prompt: "show the env"})
		if o.Status != StatusSuccess || o.FinalText != "ENV SHOWN" {
			t.Fatalf("pass %v: outcome %+v", pass, o)
		}
		reqs := x.api.Requests()
		if len(reqs) != 2 || len(reqs[1].ToolResults) != 1 {
			t.Fatalf("pass %v: %d requests", pass, len(reqs))
		}
		env := reqs[1].ToolResults[0]
		if !strings.Contains(env, "AWS_REGION=eu-west-1") {
			t.Fatalf("pass %v: the tool's env lacks AWS_REGION: %.300q", pass, env)
		}
		if got := strings.Contains(env, secret); got != pass {
			t.Errorf("pass_env %v: AWS_SECRET_ACCESS_KEY in the CLI's environment: %v", pass, got)
		}
	}
}
