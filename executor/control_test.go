//go:build unix

package executor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The replaying fake CLI: it reads the prompt from stdin (unless
// fakeNoPrompt is set), prints the recorded lines of fakeFixture, and after
// each control_request reads one line from stdin; after the last line it
// reads stdin to its end. Everything it read goes to fakeStdinLog, one line
// each.
const (
	fakeFixture  = "EXECUTOR_FAKE_FIXTURE"
	fakeStdinLog = "EXECUTOR_FAKE_STDIN_LOG"
	fakeNoPrompt = "EXECUTOR_FAKE_NO_PROMPT"
)

func fakeReplay() int {
	b, err := os.ReadFile(os.Getenv(fakeFixture))
	if err != nil {
		os.Stderr.WriteString(err.Error())
		return 2
	}
	logf, err := os.Create(os.Getenv(fakeStdinLog))
	if err != nil {
		os.Stderr.WriteString(err.Error())
		return 2
	}
	defer logf.Close()
	in := bufio.NewReader(os.Stdin)
	readLine := func() bool {
		line, err := in.ReadString('\n')
		if line != "" {
			logf.WriteString(strings.TrimSuffix(line, "\n") + "\n")
		}
		return err == nil
	}
	if os.Getenv(fakeNoPrompt) == "" && !readLine() {
		os.Stderr.WriteString("no prompt on stdin\n")
		return 3
	}
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		os.Stdout.WriteString(line)
		if strings.Contains(line, `"type":"control_request"`) && !readLine() {
			os.Stderr.WriteString("stdin closed while a control request waited\n")
			return 4
		}
	}
	if !strings.Contains(string(b), `"type":"result"`) {
		// The recording ends without a result: the CLI was killed.
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	for readLine() {
	}
	return 0
}

// controlReplay runs the fake CLI over a recording in the control protocol.
func controlReplay(t *testing.T, fixture string, req Request) (Outcome, []map[string]any, []Event) {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "stdin.log")
	abs, err := filepath.Abs(fixture)
	if err != nil {
		t.Fatal(err)
	}
	e := fakeExecutor(t, "replay", func(c *Config) {
		c.ControlProtocol = true
		c.Env[fakeFixture] = abs
		c.Env[fakeStdinLog] = logPath
		if req.Prompt == "" {
			c.Env[fakeNoPrompt] = "1"
		}
	})
	run, err := e.Start(testCtx(t), req)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var evs []Event
	for run.Next() {
		evs = append(evs, run.Event())
	}
	out := run.Outcome()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("the fake CLI's stdin log: %v (stderr %q)", err, out.Stderr)
	}
	var sent []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("the executor wrote a line that is not JSON: %q", line)
		}
		sent = append(sent, m)
	}
	return out, sent, evs
}

func controlRequests(evs []Event) []*ControlRequest {
	var out []*ControlRequest
	for _, ev := range evs {
		if c, ok := ev.(*ControlRequest); ok {
			out = append(out, c)
		}
	}
	return out
}

// response returns the inner response of a control_response line.
func response(t *testing.T, m map[string]any) (requestID, subtype string, body map[string]any) {
	t.Helper()
	if m["type"] != "control_response" {
		t.Fatalf("sent %v, want a control_response", m)
	}
	r, _ := m["response"].(map[string]any)
	requestID, _ = r["request_id"].(string)
	subtype, _ = r["subtype"].(string)
	body, _ = r["response"].(map[string]any)
	return requestID, subtype, body
}

// TestControlFixtureReplay replays every recording of the CLI in stream-json
// input mode through a Process in the control protocol: the prompt goes out
// as a user message, each control request is parsed and answered (here:
// AskUserQuestion with an answer, anything else allowed), stdin is closed
// after the result, and the outcome is the recording's.
func TestControlFixtureReplay(t *testing.T) {
	t.Parallel()
	type want struct {
		session  string
		status   Status
		category Category
		requests []string // tool names of the can_use_tool requests, in order
		prompt   bool     // the recording starts a session (a prompt is sent)
	}
	table := map[string]want{
		"ask_tool_streamjson_answered.ndjson":          {"c9abb930-63b7-42a1-8a46-154e4a3f509c", StatusSuccess, "", []string{"AskUserQuestion"}, true},
		"ask_tool_streamjson_denied.ndjson":            {"6649d9ac-bf0b-4b83-946f-8150101bc1b6", StatusSuccess, "", []string{"AskUserQuestion"}, true},
		"ask_tool_streamjson_ppt.ndjson":               {"4bb63135-e2bb-4dd9-88c3-02f7486d3585", StatusSuccess, "", []string{"AskUserQuestion"}, true},
		"bash_perm_streamjson_ppt.ndjson":              {"59aeac41-fc87-41ee-83b6-9a9f87d8274a", StatusSuccess, "", []string{"Bash"}, true},
		"defer_ask_deferred_streamjson.ndjson":         {"4840fa54-4fca-46cf-b317-9b616cd8f4d9", StatusDeferred, CategoryToolDeferred, nil, true},
		"defer_ask_resumed_answered_streamjson.ndjson": {"4840fa54-4fca-46cf-b317-9b616cd8f4d9", StatusSuccess, "", nil, false},
		"stream_input.ndjson":                          {"52edfd5b-f4d1-41f9-ae87-513dbf3093cd", StatusSuccess, "", nil, true},
		"stream_input_multiturn.ndjson":                {"819e09b5-8dcc-4002-9e0c-329ec6790d5e", StatusSuccess, "", nil, true},
		"ppt_pending_then_killed.ndjson":               {"2fd85a7f-33a3-4627-bde1-906015a5d925", StatusError, CategoryCrashed, []string{"Bash"}, true},
		"ppt_killed_then_resumed.ndjson":               {"2fd85a7f-33a3-4627-bde1-906015a5d925", StatusSuccess, "", nil, false},
	}
	var files []string
	for _, pat := range []string{"*streamjson*.ndjson", "stream_input*.ndjson", "ppt_*.ndjson"} {
		m, _ := filepath.Glob(filepath.Join(fixtureDir(), pat))
		files = append(files, m...)
	}
	if len(files) != len(table) {
		t.Errorf("%d recordings in stream-json input mode, %d in the table", len(files), len(table))
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w, ok := table[name]
			if !ok {
				t.Fatalf("recording %s has no expected outcome in this test", name)
			}
			req := Request{Prompt: "Implement spec X"}
			if !w.prompt {
				req = Request{Resume: w.session}
			}
			req.CanUseTool = func(ctx context.Context, c *ControlRequest) Permission {
				if c.ToolName == "AskUserQuestion" {
					return Permission{Allow: true, UpdatedInput: json.RawMessage(`{"answers":{"Which auth method should I use?":"OAuth2"}}`)}
				}
				return Permission{Allow: true}
			}
			out, sent, evs := controlReplay(t, f, req)
			if out.SessionID != w.session || out.Status != w.status || out.Category != w.category {
				t.Errorf("got session %s status %s category %q; want %s %s %q", out.SessionID, out.Status, out.Category, w.session, w.status, w.category)
			}
			if out.MalformedLines != 0 {
				t.Errorf("malformed lines: %v", out.Diagnostics)
			}
			reqs := controlRequests(evs)
			var names []string
			for _, c := range reqs {
				names = append(names, c.ToolName)
				if c.Subtype != SubtypeCanUseTool || c.RequestID == "" || c.ToolUseID == "" || len(c.Input) == 0 {
					t.Errorf("control request %+v", c)
				}
			}
			if strings.Join(names, ",") != strings.Join(w.requests, ",") {
				t.Errorf("requests %v, want %v", names, w.requests)
			}
			i := 0
			if w.prompt {
				if len(sent) == 0 || sent[0]["type"] != "user" {
					t.Fatalf("first line sent %v, want the prompt as a user message", sent)
				}
				msg, _ := sent[0]["message"].(map[string]any)
				if msg["role"] != "user" || msg["content"] != "Implement spec X" {
					t.Errorf("prompt message %v", msg)
				}
				i = 1
			}
			if out.Category == CategoryCrashed {
				return // the recording ends with the request unanswered
			}
			if got := len(sent) - i; got != len(reqs) {
				t.Fatalf("sent %d lines after the prompt, want one answer per request (%d): %v", got, len(reqs), sent)
			}
			for k, c := range reqs {
				id, sub, body := response(t, sent[i+k])
				if id != c.RequestID || sub != "success" || body["behavior"] != "allow" || body["updatedInput"] == nil {
					t.Errorf("answer to %s: %v", c.RequestID, sent[i+k])
				}
			}
		})
	}
}

// TestControlRequestFields checks what a can_use_tool request carries.
func TestControlRequestFields(t *testing.T) {
	t.Parallel()
	b := readFixture(t, filepath.Join(fixtureDir(), "bash_perm_streamjson_ppt.ndjson"))
	var p Parser
	var got *ControlRequest
	for _, line := range strings.Split(string(b), "\n") {
		ev, err := p.ParseLine([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := ev.(*ControlRequest); ok {
			got = c
		}
	}
	if got == nil || got.RequestID != "be6a40d1-2e48-4025-9b74-a19707557116" || got.ToolName != "Bash" ||
		got.ToolUseID != "toolu_b53c154cffff453b8819f57e" || got.Description != "Run touch made_by_tool.txt" ||
		!strings.Contains(string(got.Input), `"touch made_by_tool.txt"`) || !strings.Contains(string(got.PermissionSuggestions), `"addRules"`) ||
		got.BlockedPath == "" || got.SessionID() != "" {
		t.Errorf("control request %+v", got)
	}
	if _, err := p.ParseLine([]byte(`{"type":"control_request","request":{"subtype":"can_use_tool"}}`)); err == nil {
		t.Error("a control request without request_id parsed")
	}
	ev, err := p.ParseLine([]byte(`{"type":"control_cancel_request","request_id":"r1"}`))
	if c, ok := ev.(*ControlCancel); err != nil || !ok || c.RequestID != "r1" {
		t.Errorf("cancel: %v %v", ev, err)
	}
}

// TestControlUnknownSubtypeGetsError: a control request the executor does
// not know is answered with an error response, never left unanswered.
func TestControlUnknownSubtypeGetsError(t *testing.T) {
	t.Parallel()
	fx := filepath.Join(t.TempDir(), "unknown.ndjson")
	lines := `{"type":"system","subtype":"init","session_id":"s1","model":"m"}
{"type":"control_request","request_id":"r-mcp","request":{"subtype":"mcp_message","server_name":"x"}}
{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s1","num_turns":1}
`
	if err := os.WriteFile(fx, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	out, sent, _ := controlReplay(t, fx, Request{Prompt: "go"})
	if out.Status != StatusSuccess {
		t.Fatalf("outcome %s %s: %s", out.Status, out.Category, out.Stderr)
	}
	if len(sent) != 2 {
		t.Fatalf("sent %v", sent)
	}
	r, _ := sent[1]["response"].(map[string]any)
	if sent[1]["type"] != "control_response" || r["subtype"] != "error" || r["request_id"] != "r-mcp" ||
		!strings.Contains(r["error"].(string), "mcp_message") {
		t.Errorf("answer to an unknown request: %v", sent[1])
	}
}

// TestControlRespondByCaller: without a CanUseTool callback the caller
// answers with Respond after Next yields the request; a deny carries its
// message; answering twice is ErrNoSuchRequest.
func TestControlRespondByCaller(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "stdin.log")
	abs, _ := filepath.Abs(filepath.Join(fixtureDir(), "bash_perm_streamjson_ppt.ndjson"))
	e := fakeExecutor(t, "replay", func(c *Config) {
		c.ControlProtocol = true
		c.IdleTimeout = time.Second // a waiting request holds the idle clock
		c.Env[fakeFixture] = abs
		c.Env[fakeStdinLog] = logPath
	})
	run, err := e.Start(testCtx(t), Request{Prompt: "go"})
	if err != nil {
		t.Fatal(err)
	}
	for run.Next() {
		c, ok := run.Event().(*ControlRequest)
		if !ok {
			continue
		}
		if n := run.pendingN.Load(); n != 1 {
			t.Errorf("pending %d", n)
		}
		answered := make(chan error, 2)
		go func() {
			// Next waits meanwhile, longer than the idle timeout.
			time.Sleep(1500 * time.Millisecond)
			answered <- run.Respond(c.RequestID, Permission{Message: "not on a Friday"})
			answered <- run.Respond(c.RequestID, Permission{Allow: true})
		}()
		defer func() {
			if err := <-answered; err != nil {
				t.Error(err)
			}
			if err := <-answered; !errors.Is(err, ErrNoSuchRequest) {
				t.Errorf("second answer: %v", err)
			}
		}()
	}
	out := run.Outcome()
	if out.Status != StatusSuccess {
		t.Fatalf("outcome %s %s", out.Status, out.Category)
	}
	b, _ := os.ReadFile(logPath)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"behavior":"deny"`) || !strings.Contains(lines[1], `"message":"not on a Friday"`) {
		t.Errorf("sent %q", lines)
	}
}

// TestControlArgs: the control protocol's flags, and no prompt argument.
func TestControlArgs(t *testing.T) {
	t.Parallel()
	e, err := New(Config{ControlProtocol: true, Settings: `{"hooks":{}}`})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(e.Args(Request{Prompt: "hello"}), " ")
	want := `-p --output-format stream-json --verbose --settings {"hooks":{}} --input-format stream-json --permission-prompt-tool stdio`
	if got != want {
		t.Errorf("args\n got %s\nwant %s", got, want)
	}
	if err := e.validate(Request{Resume: "s1"}); err != nil {
		t.Errorf("a resume without a prompt: %v", err)
	}
	if err := e.validate(Request{}); err == nil {
		t.Error("no prompt and no resume accepted")
	}
	if _, err := New(Config{ControlProtocol: true, Harness: HarnessClaw}); err == nil {
		t.Error("claw with the control protocol accepted")
	}
}
