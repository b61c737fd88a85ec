package fakeapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
)

// These tests run the real Claude Code CLI against the fake API: they are
// what shows the fake is faithful enough. Each run costs about half a
// second and 200 MB, so there are few of them, in parallel.

// runCLI runs the CLI with env in stream-json mode and returns its stdout
// and exit code; stderr goes to the test log when the run fails.
func runCLI(t *testing.T, env map[string]string, args ...string) ([]byte, int) {
	t.Helper()
	all := append([]string{"-p", "--output-format", "stream-json", "--verbose"}, args...)
	cmd := clitest.Command(t, env, all...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("run claude: %v", err)
		}
		code = exit.ExitCode()
		t.Logf("claude exited %d; stderr:\n%s", code, stderr.Bytes())
	}
	return out, code
}

// startFake serves f on a loopback httptest server for the test's duration.
func startFake(t *testing.T, f *fakeapi.Server) string {
	t.Helper()
	ts := httptest.NewServer(f)
	t.Cleanup(func() {
		f.Close()
		ts.Close()
	})
	return ts.URL
}

func wantSuccess(t *testing.T, out []byte, code int, wantText string) map[string]any {
	t.Helper()
	if code != 0 {
		t.Fatalf("claude exited %d, want 0; stdout:\n%s", code, out)
	}
	res := clitest.Result(t, out)
	if res["is_error"] != false || res["subtype"] != "success" {
		t.Fatalf("result is_error=%v subtype=%v, want a success:\n%s", res["is_error"], res["subtype"], out)
	}
	if res["result"] != wantText {
		t.Errorf("result text = %q, want %q", res["result"], wantText)
	}
	return res
}

func TestCLI(t *testing.T) {
	clitest.Claude(t) // skip all at once when the CLI is missing
	t.Parallel()

	t.Run("PlainText", func(t *testing.T) {
		t.Parallel()
		f := fakeapi.New()
		env := clitest.Env(t, startFake(t, f))
		out, code := runCLI(t, env, "--", "Say something")
		wantSuccess(t, out, code, fakeapi.DefaultText)
		reqs := f.Requests()
		if len(reqs) != 1 {
			t.Fatalf("fake got %d requests, want 1", len(reqs))
		}
		if reqs[0].LastUserText != "Say something" {
			t.Errorf("LastUserText = %q, want the prompt alone", reqs[0].LastUserText)
		}
		if reqs[0].Model == "" || reqs[0].System == "" {
			t.Errorf("request has model %q and %d bytes of system prompt, want both", reqs[0].Model, len(reqs[0].System))
		}
	})

	t.Run("SlowStream", func(t *testing.T) {
		t.Parallel()
		text := "A slow reply, streamed in several small pieces."
		f := fakeapi.New(fakeapi.Rule{When: "slowly", Reply: fakeapi.Reply{Text: text, Chunks: 6, ChunkDelay: 50 * time.Millisecond}})
		out, code := runCLI(t, clitest.Env(t, startFake(t, f)), "--", "Answer slowly")
		wantSuccess(t, out, code, text)
	})

	t.Run("QuestionThenResume", func(t *testing.T) {
		t.Parallel()
		f := fakeapi.NewRehearsal()
		env := clitest.Env(t, startFake(t, f))

		out, code := runCLI(t, env, "--", "Add a login page to the demo app")
		res := clitest.Result(t, out)
		if code != 0 || res["is_error"] != false {
			t.Fatalf("first turn: exit %d, is_error %v:\n%s", code, res["is_error"], out)
		}
		text, _ := res["result"].(string)
		q := markerQuestion(t, text)
		if q.Header != "Approach" || len(q.Options) != 3 {
			t.Fatalf("marker question = %+v, want header Approach and 3 options", q)
		}
		session, _ := res["session_id"].(string)
		if session == "" {
			t.Fatalf("no session_id in the result line:\n%s", out)
		}

		chosen := q.Options[1].Label
		out, code = runCLI(t, env, "--resume", session, "--", "Approach: "+chosen)
		res = wantSuccess(t, out, code, "Done. Implemented using "+chosen+".")
		if res["session_id"] != session {
			t.Errorf("resumed session_id = %v, want %s", res["session_id"], session)
		}

		reqs := f.Requests()
		if len(reqs) != 2 {
			t.Fatalf("fake got %d requests, want 2", len(reqs))
		}
		var carried bool
		for _, m := range reqs[1].Messages {
			if m.Role == "assistant" && strings.Contains(m.Text(), text) {
				carried = true
			}
		}
		if !carried {
			t.Errorf("the resumed request does not carry the first turn's assistant text %q", text)
		}
	})

	t.Run("BashToolRoundTrip", func(t *testing.T) {
		t.Parallel()
		f := fakeapi.New(
			fakeapi.Rule{When: "fake-tool-output", Reply: fakeapi.Reply{Text: "The command printed its output."}},
			fakeapi.Rule{When: "Run the command", Reply: fakeapi.Reply{
				Text: "Running a command.",
				ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{
					"command": "echo fake-tool-output", "description": "Print a marker",
				}},
			}},
		)
		out, code := runCLI(t, clitest.Env(t, startFake(t, f)), "--allowedTools", "Bash", "--", "Run the command")
		wantSuccess(t, out, code, "The command printed its output.")
		reqs := f.Requests()
		if len(reqs) != 2 {
			t.Fatalf("fake got %d requests, want 2", len(reqs))
		}
		if len(reqs[1].ToolResults) != 1 || !strings.Contains(reqs[1].ToolResults[0], "fake-tool-output") {
			t.Errorf("second request's tool results = %q, want the command's output", reqs[1].ToolResults)
		}
	})

	t.Run("RateLimited", func(t *testing.T) {
		t.Parallel()
		f := fakeapi.New(fakeapi.Rule{Reply: fakeapi.Reply{Status: 429}})
		out, code := runCLI(t, clitest.Env(t, startFake(t, f)), "--", "Anything")
		if code != 1 {
			t.Errorf("claude exited %d, want 1", code)
		}
		res := clitest.Result(t, out)
		if res["is_error"] != true || res["api_error_status"] != float64(429) {
			t.Errorf("result is_error=%v api_error_status=%v, want true and 429:\n%s", res["is_error"], res["api_error_status"], out)
		}
	})
}

// markerQuestion decodes the single question of the one marker in text.
func markerQuestion(t *testing.T, text string) struct {
	Header  string
	Options []struct{ Label string }
} {
	t.Helper()
	_, after, ok := strings.Cut(text, "<!--QUESTION:")
	payload, _, closed := strings.Cut(after, "-->")
	if !ok || !closed {
		t.Fatalf("no complete question marker in %q", text)
	}
	var m struct {
		Questions []struct {
			Header  string
			Options []struct{ Label string }
		}
	}
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		t.Fatalf("marker payload %q: %v", payload, err)
	}
	if len(m.Questions) != 1 {
		t.Fatalf("marker has %d questions, want 1", len(m.Questions))
	}
	return m.Questions[0]
}

// BenchmarkCLITurn measures one `claude -p` turn against the fake: the
// floor under every step of a run that the orchestrator cannot go below.
func BenchmarkCLITurn(b *testing.B) {
	clitest.Claude(b)
	f := fakeapi.New()
	ts := httptest.NewServer(f)
	defer ts.Close()
	env := clitest.Env(b, ts.URL)
	for b.Loop() {
		cmd := clitest.Command(b, env, "-p", "--output-format", "stream-json", "--verbose", "--", "Say something")
		if out, err := cmd.Output(); err != nil {
			b.Fatalf("claude: %v\n%s", err, out)
		}
	}
}
