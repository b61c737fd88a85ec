//go:build unix

package executor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The fake claude: the test binary re-executed with fakeEnv set to a
// scenario name (golang/go's os/exec tests do the same).
const fakeEnv = "EXECUTOR_FAKE_CLAUDE"

func TestMain(m *testing.M) {
	if sc := os.Getenv(fakeEnv); sc != "" {
		os.Exit(fakeClaude(sc))
	}
	os.Exit(m.Run())
}

const fakeSession = "f0000000-0000-4000-8000-000000000001"

func fakeLine(typ string, kv ...any) {
	m := map[string]any{"type": typ, "session_id": fakeSession}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	os.Stdout.Write(append(b, '\n'))
}

func fakeInit() { fakeLine("system", "subtype", "init", "model", "fake") }
func fakeResult() {
	fakeLine("result", "subtype", "success", "is_error", false, "result", "fake done", "num_turns", 1)
}
func fakeText(s string) {
	fakeLine("assistant", "message", map[string]any{"id": "m", "content": []any{map[string]any{"type": "text", "text": s}}})
}

// fakeClaude plays one scenario and returns the exit code.
func fakeClaude(scenario string) int {
	switch scenario {
	case "replay":
		return fakeReplay()
	case "big":
		fakeInit()
		fakeText(strings.Repeat("y", 5<<20))
		fakeResult()
	case "malformed":
		fakeInit()
		os.Stdout.WriteString("this is not json\n")
		os.Stdout.WriteString(`{"type":"brand_new_type","session_id":"` + fakeSession + `"}` + "\n")
		fakeResult()
	case "noresult_exit1":
		fakeInit()
		fakeText("partial")
		os.Stderr.WriteString("Error: something broke\n")
		return 1
	case "stall":
		fakeInit()
		time.Sleep(time.Hour)
	case "hang_after_result":
		signal.Ignore(syscall.SIGINT)
		fakeInit()
		fakeResult()
		time.Sleep(time.Hour)
	case "stubborn":
		signal.Ignore(syscall.SIGINT)
		fakeInit()
		time.Sleep(time.Hour)
	case "cancel":
		// A tool-like child in the same process group; on SIGINT wait for
		// it (it gets SIGINT too) and exit like the CLI does.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT)
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), fakeEnv+"=sleeper")
		if err := child.Start(); err != nil {
			return 3
		}
		fakeInit()
		fakeLine("grandchild", "pid", child.Process.Pid)
		fakeText("working")
		<-sigs
		child.Wait()
		return 130
	case "sleeper":
		time.Sleep(time.Hour)
	case "claw_ok":
		os.Stdout.WriteString("{\n  \"message\": \"claw done\",\n  \"model\": \"m\",\n  \"iterations\": 2,\n  \"usage\": {\"input_tokens\": 3, \"output_tokens\": 4},\n  \"estimated_cost\": \"$0.0100\"\n}\n")
	case "claw_err":
		os.Stdout.WriteString(`{"type":"error","error":"api failed: 429 rate limit","kind":"api_rate_limit_error","hint":"Wait and retry."}` + "\n")
		return 1
	case "parent":
		// An orchestrator running a CLI; the test kills it with SIGKILL.
		exe, _ := os.Executable()
		e, err := New(Config{Command: exe, Env: map[string]string{fakeEnv: "stall"}})
		if err != nil {
			return 3
		}
		run, err := e.Start(context.Background(), Request{Prompt: "x"})
		if err != nil || run.PID() == 0 {
			return 4
		}
		run.Next() // the init line: the child is up
		fmt.Printf("%d\n", run.PID())
		time.Sleep(time.Hour)
	case "leak_stdout":
		// A descendant outside the process group keeps stdout open.
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), fakeEnv+"=sleeper")
		child.Stdout = os.Stdout
		child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := child.Start(); err != nil {
			return 3
		}
		fakeInit()
		fakeLine("grandchild", "pid", child.Process.Pid)
		fakeResult()
	case "echo":
		// Report the arguments, environment and stdin as lines.
		in, _ := os.ReadFile("/dev/stdin")
		info := map[string]any{"args": os.Args[1:], "stdin": string(in)}
		for i, a := range os.Args {
			if a == "--mcp-config" && i+1 < len(os.Args) {
				p := os.Args[i+1]
				if fi, err := os.Stat(p); err == nil {
					b, _ := os.ReadFile(p)
					info["mcp_mode"] = fmt.Sprintf("%o", fi.Mode().Perm())
					info["mcp_content"] = string(b)
					info["mcp_path"] = p
				}
			}
		}
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		info["env"] = env
		wd, _ := os.Getwd()
		info["wd"] = wd
		fakeLine("echo", "info", info)
		fakeResult()
	default:
		fmt.Fprintf(os.Stderr, "unknown fake scenario %q\n", scenario)
		return 2
	}
	return 0
}

// fakeExecutor runs the fake claude for scenario.
func fakeExecutor(t *testing.T, scenario string, mod func(*Config)) *Executor {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Command:     exe,
		Env:         map[string]string{fakeEnv: scenario},
		KillGrace:   500 * time.Millisecond,
		ResultGrace: 10 * time.Second, // generous: a loaded machine is slow to exit
	}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// collect runs req to the end and returns the events and the outcome.
func collect(t *testing.T, ctx context.Context, e *Executor, req Request) ([]Event, Outcome) {
	t.Helper()
	if req.Prompt == "" {
		req.Prompt = "hello"
	}
	run, err := e.Start(ctx, req)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var evs []Event
	for run.Next() {
		evs = append(evs, run.Event())
	}
	return evs, run.Outcome()
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestRunBigLine(t *testing.T) {
	t.Parallel()
	tp := filepath.Join(t.TempDir(), "run.ndjson")
	evs, o := collect(t, testCtx(t), fakeExecutor(t, "big", nil), Request{TranscriptPath: tp})
	if o.Status != StatusSuccess || o.ExitCode != 0 || o.SessionID != fakeSession || o.FinalText != "fake done" {
		t.Fatalf("outcome %+v", o)
	}
	if len(evs) != 3 || len(evs[1].(*AssistantMessage).Texts()[0]) != 5<<20 {
		t.Fatalf("%d events", len(evs))
	}
	saved, err := os.ReadFile(tp)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 + len(evs[0].Raw()) + len(evs[1].Raw()) + len(evs[2].Raw()); len(saved) != want || o.TranscriptPath != tp {
		t.Errorf("transcript %d bytes, want %d", len(saved), want)
	}
	if fi, _ := os.Stat(tp); fi.Mode().Perm() != 0o600 {
		t.Errorf("transcript mode %v", fi.Mode())
	}
}

func TestRunMalformedAndUnknown(t *testing.T) {
	t.Parallel()
	evs, o := collect(t, testCtx(t), fakeExecutor(t, "malformed", nil), Request{})
	if o.Status != StatusSuccess || o.MalformedLines != 1 || len(o.Warnings) == 0 {
		t.Fatalf("outcome %+v", o)
	}
	var unknown *Unknown
	for _, ev := range evs {
		if u, ok := ev.(*Unknown); ok {
			unknown = u
		}
	}
	if unknown == nil || unknown.Type != "brand_new_type" {
		t.Errorf("no Unknown event in %d events", len(evs))
	}
}

func TestRunNoResultExit1(t *testing.T) {
	t.Parallel()
	_, o := collect(t, testCtx(t), fakeExecutor(t, "noresult_exit1", nil), Request{})
	if o.Status != StatusError || o.Category != CategoryCrashed || o.ExitCode != 1 {
		t.Fatalf("outcome %+v", o)
	}
	if !strings.Contains(o.Stderr, "something broke") || !strings.Contains(o.Error, "something broke") || o.FinalText != "partial" {
		t.Errorf("stderr %q error %q final %q", o.Stderr, o.Error, o.FinalText)
	}
}

func TestRunIdleTimeout(t *testing.T) {
	t.Parallel()
	e := fakeExecutor(t, "stall", func(c *Config) { c.IdleTimeout = time.Second })
	start := time.Now()
	evs, o := collect(t, testCtx(t), e, Request{})
	if o.Category != CategoryIdleTimeout || o.Status != StatusError || len(evs) != 1 {
		t.Fatalf("outcome %+v after %d events", o, len(evs))
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("stopped after %s, before the idle timeout", d)
	}
	if o.Signal == "" {
		t.Errorf("the CLI was not ended by a signal: exit %d", o.ExitCode)
	}
}

func TestRunTimeout(t *testing.T) {
	t.Parallel()
	e := fakeExecutor(t, "stall", func(c *Config) { c.Timeout = time.Second })
	_, o := collect(t, testCtx(t), e, Request{})
	if o.Category != CategoryTimeout {
		t.Fatalf("outcome %+v", o)
	}
}

func TestRunHangAfterResult(t *testing.T) {
	t.Parallel()
	e := fakeExecutor(t, "hang_after_result", func(c *Config) { c.ResultGrace = 500 * time.Millisecond })
	_, o := collect(t, testCtx(t), e, Request{})
	if o.Status != StatusSuccess || o.Category != "" || o.Signal == "" {
		t.Fatalf("outcome %+v", o)
	}
	found := false
	for _, w := range o.Warnings {
		found = found || strings.Contains(w, "after its result line")
	}
	if !found {
		t.Errorf("no warning about the hang: %q", o.Warnings)
	}
}

func TestRunCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	run, err := fakeExecutor(t, "cancel", nil).Start(ctx, Request{Prompt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	grandchild := 0
	for run.Next() {
		if u, ok := run.Event().(*Unknown); ok && u.Type == "grandchild" {
			var v struct{ PID int }
			json.Unmarshal(u.Raw(), &v)
			grandchild = v.PID
		}
		if _, ok := run.Event().(*AssistantMessage); ok {
			cancel() // mid-stream
		}
	}
	o := run.Outcome()
	if o.Category != CategoryCancelled || o.Status != StatusError || o.ExitCode != 130 {
		t.Fatalf("outcome %+v", o)
	}
	if grandchild == 0 {
		t.Fatal("no grandchild line")
	}
	// The process group is gone, zombies included.
	if err := syscall.Kill(-run.PID(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d still exists: %v", run.PID(), err)
	}
	if err := syscall.Kill(grandchild, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("grandchild %d still exists: %v", grandchild, err)
	}
}

func TestRunCancelKillsStubborn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	run, err := fakeExecutor(t, "stubborn", nil).Start(ctx, Request{Prompt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for run.Next() {
		cancel()
	}
	o := run.Outcome()
	if o.Category != CategoryCancelled || o.Signal != syscall.SIGKILL.String() {
		t.Fatalf("outcome %+v", o)
	}
}

func TestRunStdoutHeldByDescendant(t *testing.T) {
	t.Parallel()
	run, err := fakeExecutor(t, "leak_stdout", nil).Start(testCtx(t), Request{Prompt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for run.Next() {
		if u, ok := run.Event().(*Unknown); ok && u.Type == "grandchild" {
			var v struct{ PID int }
			json.Unmarshal(u.Raw(), &v)
			if v.PID > 0 {
				t.Cleanup(func() { syscall.Kill(v.PID, syscall.SIGKILL) })
			}
		}
	}
	o := run.Outcome()
	if o.Status != StatusSuccess {
		t.Fatalf("outcome %+v", o)
	}
	found := false
	for _, w := range o.Warnings {
		found = found || strings.Contains(w, "stayed open")
	}
	if !found {
		t.Errorf("warnings %q", o.Warnings)
	}
}

// TestRunParentKilled: when the orchestrator dies by SIGKILL, its CLI gets
// SIGTERM (Pdeathsig) instead of running on as an orphan.
func TestRunParentKilled(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux only")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(exe)
	parent.Env = append(os.Environ(), fakeEnv+"=parent")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { parent.Process.Kill(); parent.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read the child's pid: %v", err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || child <= 0 {
		t.Fatalf("child pid %q", line)
	}
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	parent.Wait()
	deadline := time.Now().Add(time.Minute)
	for alive(child) {
		if time.Now().After(deadline) {
			t.Fatalf("the CLI %d still runs a minute after its parent died", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state …: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestRunMissingBinary(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{filepath.Join(t.TempDir(), "no-such-claude"), "no-such-claude-binary-xyz"} {
		e, err := New(Config{Command: cmd})
		if err != nil {
			t.Fatal(err)
		}
		run, err := e.Start(context.Background(), Request{Prompt: "x"})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		if run.Next() {
			t.Fatal("events from a missing binary")
		}
		o := run.Outcome()
		if o.Category != CategoryCLINotFound || o.Status != StatusError || !strings.Contains(o.Error, "not found") {
			t.Errorf("outcome %+v", o)
		}
	}
}

func TestRunCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, o := collect(t, ctx, fakeExecutor(t, "big", nil), Request{})
	if o.Category != CategoryCancelled || o.ExitCode != -1 {
		t.Fatalf("outcome %+v", o)
	}
}

func TestRunEnvArgsAndMCP(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	e := fakeExecutor(t, "echo", func(c *Config) {
		c.BaseEnv = []string{"PATH=/usr/bin:/bin", "CLAUDECODE=1", "CLAUDE_CODE_ENTRYPOINT=cli",
			"GITHUB_TOKEN=gh-secret", "GH_TOKEN=gh2", "DISCORD_TOKEN=dc", "ANTHROPIC_BASE_URL=http://127.0.0.1:1",
			"CLAUDE_CODE_MAX_RETRIES=0", "DISABLE_TELEMETRY=1", "MY_SECRET=s", "KEEP=1"}
		c.DropEnv = []string{"MY_*"}
		c.Env["EXTRA"] = "x"
		c.Env["KEEP"] = "2"
		c.MCPServers = map[string]any{"echo": map[string]any{"command": "echo-server", "env": map[string]string{"TOKEN": "t"}}}
		c.AllowedTools = []string{"Bash(go test:*)", "Read"}
		c.AppendSystemPrompt = "Ask with the marker."
	})
	evs, o := collect(t, testCtx(t), e, Request{Prompt: "-starts with a dash", WorkDir: wd, Resume: fakeSession})
	if o.Status != StatusSuccess {
		t.Fatalf("outcome %+v", o)
	}
	var info struct {
		Args       []string          `json:"args"`
		Stdin      string            `json:"stdin"`
		Env        map[string]string `json:"env"`
		MCPMode    string            `json:"mcp_mode"`
		MCPContent string            `json:"mcp_content"`
		MCPPath    string            `json:"mcp_path"`
		WD         string            `json:"wd"`
	}
	for _, ev := range evs {
		if u, ok := ev.(*Unknown); ok && u.Type == "echo" {
			var v struct{ Info json.RawMessage }
			json.Unmarshal(u.Raw(), &v)
			if err := json.Unmarshal(v.Info, &info); err != nil {
				t.Fatal(err)
			}
		}
	}
	args := strings.Join(info.Args, "|")
	for _, want := range []string{"|--allowedTools|Bash(go test:*)|Read|", "|--resume|" + fakeSession + "|",
		"|--append-system-prompt|Ask with the marker.|", "|--|-starts with a dash"} {
		if !strings.Contains("|"+args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if info.Stdin != "" {
		t.Errorf("stdin %q", info.Stdin)
	}
	for _, gone := range []string{"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "GITHUB_TOKEN", "GH_TOKEN", "DISCORD_TOKEN", "MY_SECRET"} {
		if _, ok := info.Env[gone]; ok {
			t.Errorf("%s inherited", gone)
		}
	}
	for k, v := range map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:1", "CLAUDE_CODE_MAX_RETRIES": "0",
		"DISABLE_TELEMETRY": "1", "EXTRA": "x", "KEEP": "2", "PATH": "/usr/bin:/bin"} {
		if info.Env[k] != v {
			t.Errorf("%s = %q, want %q", k, info.Env[k], v)
		}
	}
	if info.MCPMode != "600" || !strings.Contains(info.MCPContent, `"mcpServers"`) || !strings.Contains(info.MCPContent, "echo-server") {
		t.Errorf("mcp file mode %s content %s", info.MCPMode, info.MCPContent)
	}
	if _, err := os.Stat(info.MCPPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("MCP temp file %s not removed: %v", info.MCPPath, err)
	}
	if real, _ := filepath.EvalSymlinks(wd); info.WD != real && info.WD != wd {
		t.Errorf("work dir %s, want %s", info.WD, wd)
	}
}

func TestRunClaw(t *testing.T) {
	t.Parallel()
	claw := func(c *Config) { c.Harness = HarnessClaw; c.IdleTimeout = time.Hour }
	evs, o := collect(t, testCtx(t), fakeExecutor(t, "claw_ok", claw), Request{})
	if o.Status != StatusSuccess || o.FinalText != "claw done" || o.NumTurns != 2 || o.CostUSD != 0.01 || o.Usage.OutputTokens != 4 || len(evs) != 1 {
		t.Fatalf("outcome %+v, %d events", o, len(evs))
	}
	_, o = collect(t, testCtx(t), fakeExecutor(t, "claw_err", claw), Request{Resume: "sess.jsonl"})
	if o.Status != StatusError || o.Category != CategoryRateLimit || o.Hint != "Wait and retry." || o.ExitCode != 1 || o.SessionID != "sess.jsonl" {
		t.Fatalf("outcome %+v", o)
	}
	_, o = collect(t, testCtx(t), fakeExecutor(t, "stall", func(c *Config) { claw(c); c.Timeout = time.Second }), Request{})
	if o.Category != CategoryTimeout {
		t.Fatalf("outcome %+v", o)
	}
}

func TestArgs(t *testing.T) {
	t.Parallel()
	e, err := New(Config{
		Model: "opus", PermissionMode: "acceptEdits", MaxTurns: 7, MCPConfig: "mcp.json",
		MCPServers: map[string]any{"x": map[string]any{}}, StrictMCPConfig: true,
		AllowedTools: []string{"Bash(go test:*)", "Edit"}, DisallowedTools: []string{"WebFetch"},
		AppendSystemPrompt: "sys", DangerouslySkipPermissions: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := e.Args(Request{Prompt: "--help me", SessionID: "u-1"})
	want := []string{"-p", "--output-format", "stream-json", "--verbose", "--model", "opus",
		"--permission-mode", "acceptEdits", "--max-turns", "7", "--session-id", "u-1",
		"--mcp-config", "mcp.json", "--mcp-config", MCPConfigPlaceholder, "--strict-mcp-config",
		"--allowedTools", "Bash(go test:*)", "Edit", "--disallowedTools", "WebFetch",
		"--append-system-prompt", "sys", "--dangerously-skip-permissions", "--", "--help me"}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("Args:\n got %q\nwant %q", got, want)
	}
	plain, _ := New(Config{})
	if got := plain.Args(Request{Prompt: "p", Resume: "r"}); strings.Join(got, " ") != "-p --output-format stream-json --verbose --resume r -- p" {
		t.Errorf("plain args %q", got)
	}
	// A run's own limits: the request's turn limit wins over the config's,
	// and what is left of its budget is passed as --max-budget-usd.
	if got := e.Args(Request{Prompt: "p", Resume: "r", MaxTurns: 3, MaxBudgetUSD: 0.25}); !strings.Contains(strings.Join(got, " "), "--max-turns 3 --max-budget-usd 0.25 --resume r") {
		t.Errorf("args with the request's limits %q", got)
	}
	for _, a := range plain.Args(Request{Prompt: "p"}) {
		if a == "--dangerously-skip-permissions" {
			t.Error("skip-permissions without opt-in")
		}
	}
	claw, _ := New(Config{Harness: HarnessClaw, Model: "m", AllowedTools: []string{"read", "bash"}})
	if got := strings.Join(claw.Args(Request{Prompt: "p", Resume: "s.jsonl"}), " "); got != "--output-format json --model m --allowedTools read,bash --resume s.jsonl -p p" {
		t.Errorf("claw args %q", got)
	}
}

func TestConfigAndRequestValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []Config{
		{Harness: "codex"}, {MaxTurns: -1}, {AllowedTools: []string{"--evil"}}, {Env: map[string]string{"A=B": "x"}},
		{Timeout: -time.Second},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	e, _ := New(Config{})
	notDir := filepath.Join(t.TempDir(), "f")
	os.WriteFile(notDir, nil, 0o600)
	for _, r := range []Request{{}, {Prompt: "  "}, {Prompt: "x", Resume: "a", SessionID: "b"},
		{Prompt: "x", Resume: "--evil"}, {Prompt: "x", WorkDir: notDir}, {Prompt: "x", WorkDir: filepath.Join(notDir, "no")}} {
		if _, err := e.Start(context.Background(), r); err == nil {
			t.Errorf("Start(%+v) accepted", r)
		}
	}
}

func TestRunTranscriptDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "transcripts")
	_, o := collect(t, testCtx(t), fakeExecutor(t, "malformed", func(c *Config) { c.TranscriptDir = dir }), Request{})
	if filepath.Dir(o.TranscriptPath) != dir {
		t.Fatalf("transcript %q", o.TranscriptPath)
	}
	b, err := os.ReadFile(o.TranscriptPath)
	if err != nil || !bytes.Contains(b, []byte("this is not json")) {
		t.Errorf("transcript: %v %q", err, b)
	}
	// Replaying the saved transcript gives the same outcome.
	f, _ := os.Open(o.TranscriptPath)
	defer f.Close()
	o2, _ := Replay(f, ReaderOptions{}, nil)
	if o2.SessionID != o.SessionID || o2.Status != o.Status || o2.MalformedLines != 1 {
		t.Errorf("replay %+v", o2)
	}
}

func TestSessionTranscriptHas(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	dir := filepath.Join(home, ".claude", "projects", "-home-dev-proj")
	os.MkdirAll(dir, 0o700)
	line := `{"type":"user","message":{"role":"user","content":"OAuth2 \"quoted\"\nsecond line"},"sessionId":"s1"}` + "\n"
	os.WriteFile(filepath.Join(dir, "s1.jsonl"), []byte(strings.Repeat(`{"pad":"`+strings.Repeat("z", 1000)+`"}`+"\n", 600)+line), 0o600)
	e, _ := New(Config{BaseEnv: []string{}, Env: map[string]string{"HOME": home}})
	for needle, want := range map[string]bool{"OAuth2": true, "OAuth2 \"quoted\"\nsecond line": true, "JWT": false} {
		got, err := e.SessionTranscriptHas("s1", needle)
		if err != nil || got != want {
			t.Errorf("SessionTranscriptHas(%q) = %v, %v", needle, got, err)
		}
	}
	if _, err := e.SessionTranscriptHas("nope", "x"); !errors.Is(err, ErrSessionFileNotFound) {
		t.Errorf("missing session: %v", err)
	}
	if _, err := e.SessionTranscriptHas("../x", "x"); err == nil {
		t.Error("path in session id accepted")
	}
	// Only a prompt of the user in the main conversation counts (measured
	// with 2.1.330, see SessionTranscriptHas).
	for name, tc := range map[string]struct {
		line string
		want bool
	}{
		"the queued prompt only": {`{"type":"queue-operation","operation":"enqueue","sessionId":"s3","content":"ANSWERS-s1"}`, false},
		"the last-prompt record": {`{"type":"last-prompt","lastPrompt":"ANSWERS-s1","sessionId":"s3"}`, false},
		"a text block":           {`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[ANSWERS-s1]"}]}}`, true},
		"a tool result":          {`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ANSWERS-s1"}]}}`, false},
		"a sub-agent's prompt":   {`{"type":"user","isSidechain":true,"message":{"role":"user","content":"ANSWERS-s1"}}`, false},
		"a line cut short":       {`{"type":"user","message":{"role":"user","content":"ANSWERS-s1`, false},
		"the assistant's text":   {`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"ANSWERS-s1"}]}}`, false},
	} {
		os.WriteFile(filepath.Join(dir, "s3.jsonl"), []byte(tc.line+"\n"), 0o600)
		if got, err := e.SessionTranscriptHas("s3", "ANSWERS-s1"); got != tc.want || err != nil {
			t.Errorf("%s: SessionTranscriptHas = %v, %v; want %v", name, got, err, tc.want)
		}
		if got := SessionHasPrompt([]byte(`{"type":"x"}`+"\n"+tc.line), "ANSWERS-s1"); got != tc.want {
			t.Errorf("%s: SessionHasPrompt = %v; want %v", name, got, tc.want)
		}
	}
	cfgDir := t.TempDir()
	os.MkdirAll(filepath.Join(cfgDir, "projects", "p"), 0o700)
	os.WriteFile(filepath.Join(cfgDir, "projects", "p", "s2.jsonl"), []byte(line), 0o600)
	e2, _ := New(Config{BaseEnv: []string{}, Env: map[string]string{"HOME": home, "CLAUDE_CONFIG_DIR": cfgDir}})
	if ok, err := e2.SessionTranscriptHas("s2", "OAuth2"); !ok || err != nil {
		t.Errorf("lookup under CLAUDE_CONFIG_DIR: %v %v", ok, err)
	}
}

// TestArgsAreRealFlags checks every flag the command builder can emit
// against the real CLI's --help (recorded in the fixtures), so a renamed flag
// is caught here rather than at 2 a.m. Two flags work but are not listed
// there (docs/claude-cli.md): --max-turns and --permission-prompt-tool.
func TestArgsAreRealFlags(t *testing.T) {
	t.Parallel()
	help, err := os.ReadFile(filepath.Join(fixtureDir(), "claude-help.txt"))
	if err != nil {
		t.Fatalf("the CLI's recorded --help: %v", err)
	}
	undocumented := map[string]bool{"--max-turns": true, "--permission-prompt-tool": true}
	e, err := New(Config{
		Model: "opus", PermissionMode: "acceptEdits", MaxTurns: 7, MCPConfig: "mcp.json", StrictMCPConfig: true,
		AllowedTools: []string{"Edit"}, DisallowedTools: []string{"WebFetch"}, AppendSystemPrompt: "sys",
		DangerouslySkipPermissions: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	args := append(e.Args(Request{Prompt: "p", SessionID: "u"}), e.Args(Request{Prompt: "p", Resume: "r"})...)
	for _, a := range args {
		if a == "--" {
			continue
		}
		if !strings.HasPrefix(a, "-") || undocumented[a] {
			continue
		}
		if !regexp.MustCompile(`(^|[\s,])` + regexp.QuoteMeta(a) + `([\s,<\[]|$)`).Match(help) {
			t.Errorf("flag %s is not in the CLI's --help", a)
		}
	}
}

// TestRunSecretEnvNotInherited: variables that look like secrets are not
// inherited unless PassEnv lists them; the CLI's own credentials are.
func TestRunSecretEnvNotInherited(t *testing.T) {
	t.Parallel()
	base := []string{"PATH=/usr/bin:/bin", "AWS_SECRET_ACCESS_KEY=s1", "AWS_ACCESS_KEY_ID=s2", "AWS_SESSION_TOKEN=s3",
		"NPM_TOKEN=s4", "DB_PASSWORD=s5", "STRIPE_API_KEY=s6", "CLIENT_SECRET_VALUE=s7", "GOOGLE_APPLICATION_CREDENTIALS=s8",
		"ANTHROPIC_API_KEY=agent", "ANTHROPIC_AUTH_TOKEN=agent2", "CLAUDE_CODE_OAUTH_TOKEN=agent3", "AWS_REGION=eu-west-1", "KEYBOARD=us"}
	for _, tc := range []struct {
		pass []string
		want []string // the secret-looking names inherited
	}{
		{nil, nil},
		{[]string{"AWS_SECRET_ACCESS_KEY", "NPM_*"}, []string{"AWS_SECRET_ACCESS_KEY", "NPM_TOKEN"}},
	} {
		e, err := New(Config{BaseEnv: base, PassEnv: tc.pass, Env: map[string]string{"EXPLICIT_TOKEN": "given"}})
		if err != nil {
			t.Fatal(err)
		}
		env := map[string]string{}
		for _, kv := range e.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		for _, k := range []string{"PATH", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "AWS_REGION", "KEYBOARD", "EXPLICIT_TOKEN"} {
			if _, ok := env[k]; !ok {
				t.Errorf("pass %q: %s not passed on", tc.pass, k)
			}
		}
		for _, k := range []string{"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "NPM_TOKEN", "DB_PASSWORD",
			"STRIPE_API_KEY", "CLIENT_SECRET_VALUE", "GOOGLE_APPLICATION_CREDENTIALS"} {
			_, got := env[k]
			want := slices.Contains(tc.want, k)
			if got != want {
				t.Errorf("pass %q: %s inherited %v, want %v", tc.pass, k, got, want)
			}
		}
	}
	if _, err := New(Config{PassEnv: []string{"*"}}); err == nil {
		t.Error(`pass env "*" accepted`)
	}
}

// TestRunSecretsKeptOutByValue: a configured secret never reaches the
// child whatever the variable carrying it is called (inherited or in Env,
// whole or inside a longer value, listed in PassEnv or not); GH_*,
// GITHUB_*, SLACK_* and PGPASSWORD are not inherited by name.
func TestRunSecretsKeptOutByValue(t *testing.T) {
	t.Parallel()
	const tok, hook, dbURL = "ghp_configured0123456789", "hook-secret-0123", "postgres://u:pw-0123456789@db/x"
	base := []string{"PATH=/usr/bin:/bin", "GHX=" + tok, "HOOKS=" + hook, "AUTH_HEADER=Bearer " + tok, "DATABASE_URL=" + dbURL,
		"PGPASSWORD=pw-0123456789", "GH_TOKEN=person-token", "GITHUB_TOKEN=t2", "GH_ENTERPRISE_TOKEN=t3", "GH_CONFIG_DIR=/home/svc/.config/gh",
		"SLACK_BOT_TOKEN=xoxb-1", "SHORT=ab", "KEEP=value"}
	e, err := New(Config{BaseEnv: base, PassEnv: []string{"GHX", "HOOKS"},
		Secrets: []string{tok, hook, dbURL, "pw-0123456789", "ab"},
		Env:     map[string]string{"X": tok, "Y": "prefix-" + hook, "GIVEN": "spec-value"}})
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(e.Environ(), "\n")
	for _, secret := range []string{tok, hook, dbURL, "pw-0123456789", "person-token", "GITHUB_TOKEN=", "GH_ENTERPRISE_TOKEN=", "GH_CONFIG_DIR=/home", "xoxb-1", "SHORT="} {
		if strings.Contains(env, secret) {
			t.Errorf("the child's environment holds %q:\n%s", secret, env)
		}
	}
	for _, want := range []string{"KEEP=value", "GIVEN=spec-value", "PATH=/usr/bin:/bin"} {
		if !strings.Contains(env, want) {
			t.Errorf("the child's environment lacks %q", want)
		}
	}
}

// TestRunLargePromptOnStdin: a prompt over MaxArgPrompt is written to the
// CLI's stdin, with no prompt argument; a short one stays an argument.
func TestRunLargePromptOnStdin(t *testing.T) {
	t.Parallel()
	big := "-" + strings.Repeat("x", MaxArgPrompt) + "END"
	for _, prompt := range []string{"short", big} {
		evs, o := collect(t, testCtx(t), fakeExecutor(t, "echo", nil), Request{Prompt: prompt})
		if o.Status != StatusSuccess {
			t.Fatalf("outcome %+v", o)
		}
		var info struct {
			Args  []string `json:"args"`
			Stdin string   `json:"stdin"`
		}
		for _, ev := range evs {
			if u, ok := ev.(*Unknown); ok && u.Type == "echo" {
				var v struct{ Info json.RawMessage }
				json.Unmarshal(u.Raw(), &v)
				if err := json.Unmarshal(v.Info, &info); err != nil {
					t.Fatal(err)
				}
			}
		}
		onStdin := len(prompt) > MaxArgPrompt
		if onStdin && (info.Stdin != prompt || slices.Contains(info.Args, "--") || strings.Contains(strings.Join(info.Args, " "), "END")) {
			t.Errorf("big prompt: stdin %d bytes, args %.200q", len(info.Stdin), info.Args)
		}
		if !onStdin && (info.Stdin != "" || info.Args[len(info.Args)-1] != prompt || info.Args[len(info.Args)-2] != "--") {
			t.Errorf("short prompt: stdin %q, args %q", info.Stdin, info.Args)
		}
	}
}

// TestRunOversizeLineSkippedAndReported: a line over the cap is skipped, the
// Outcome says so with the line's length and first bytes, the transcript
// keeps a bounded prefix of it (not the whole line), and the line after it
// is read and saved as usual.
func TestRunOversizeLineSkippedAndReported(t *testing.T) {
	t.Parallel()
	tp := filepath.Join(t.TempDir(), "run.ndjson")
	const limit = 1 << 20
	evs, o := collect(t, testCtx(t), fakeExecutor(t, "big", func(c *Config) { c.MaxLineBytes = limit }), Request{TranscriptPath: tp})
	if o.Status != StatusSuccess || o.FinalText != "fake done" || len(evs) != 2 {
		t.Fatalf("%d events, outcome %+v", len(evs), o)
	}
	d := o.FirstOversize
	if o.OversizeLines != 1 || d == nil || d.Line != 2 || d.Bytes <= 5<<20 ||
		!strings.HasPrefix(d.Prefix, `{"message":{"content":[{"text":"yyy`) || len(d.Prefix) != SkippedPrefixBytes {
		t.Fatalf("oversize %d, first %+v prefix %q", o.OversizeLines, d, d.Prefix)
	}
	if !strings.Contains(strings.Join(o.Warnings, "\n"), fmt.Sprintf("line 2: oversize: line of %d bytes skipped", d.Bytes)) {
		t.Errorf("warnings %q", o.Warnings)
	}
	saved, err := os.ReadFile(tp)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(saved), "\n"), "\n")
	if len(lines) != 3 || lines[0] != string(evs[0].Raw()) || lines[2] != string(evs[1].Raw()) {
		t.Fatalf("transcript: %d lines, %d bytes", len(lines), len(saved))
	}
	if len(lines[1]) != min(TranscriptPrefixBytes, limit) || !strings.HasPrefix(lines[1], d.Prefix) {
		t.Errorf("the transcript keeps %d bytes of the oversize line, want its first %d", len(lines[1]), min(TranscriptPrefixBytes, limit))
	}
	// Replayed, the cut line is a malformed line; the rest reads the same.
	f, _ := os.Open(tp)
	defer f.Close()
	o2, err := Replay(f, ReaderOptions{MaxLineBytes: limit}, nil)
	if err != nil || o2.Status != StatusSuccess || o2.FinalText != "fake done" || o2.MalformedLines != 1 {
		t.Errorf("replay: %v %+v", err, o2)
	}
}

// TestTranscriptCutsOversizeLines drives the transcript writer with chunks
// that split lines anywhere.
func TestTranscriptCutsOversizeLines(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 300)
	in := "short\n" + long + "\n" + "x\n" + long + long + "\n" + "tail-no-newline-" + long
	want := "short\n" + long[:100] + "\n" + "x\n" + long[:100] + "\n" + "tail-no-newline-" + long[:84]
	for _, chunk := range []int{1, 7, 64, 1000} {
		path := filepath.Join(t.TempDir(), "t.ndjson")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		tr := &transcript{f: f, max: 100}
		for b := []byte(in); len(b) > 0; {
			n := min(chunk, len(b))
			if err := tr.write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
		f.Close()
		got, _ := os.ReadFile(path)
		if string(got) != want {
			t.Errorf("chunk %d: saved %q\nwant %q", chunk, got, want)
		}
	}
}

// TestRunIdleTimeoutHeld: while a person is asked for the CLI outside the
// control protocol (Hold), its silence does not end it; once released, the
// idle timeout applies again, whole.
func TestRunIdleTimeoutHeld(t *testing.T) {
	t.Parallel()
	e := fakeExecutor(t, "stall", func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	run, err := e.Start(testCtx(t), Request{Prompt: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	release := run.Hold()
	done := make(chan Outcome, 1)
	go func() {
		for run.Next() {
		}
		done <- run.Outcome()
	}()
	select {
	case o := <-done:
		t.Fatalf("the CLI was stopped while held: %+v", o)
	case <-time.After(2 * time.Second): // several idle timeouts
	}
	release()
	release() // twice: counted once
	select {
	case o := <-done:
		if o.Category != CategoryIdleTimeout {
			t.Fatalf("outcome %+v, want the idle timeout", o)
		}
	case <-time.After(time.Minute):
		t.Fatal("the idle timeout never applied after the release")
	}
}
