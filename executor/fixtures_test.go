package executor

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixtureDir is the recorded output of the real CLI, kept in this package's
// testdata (see its README for what each recording shows).
func fixtureDir() string {
	return filepath.Join("testdata", "claude-code-2.1.330")
}

// fixtureFiles lists the .ndjson fixtures; it fails clearly when they are
// missing.
func fixtureFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fixtureDir(), "*.ndjson"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in %s (they are part of the repository: is the clone complete?): %v", fixtureDir(), err)
	}
	return files
}

func readFixture(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return b
}

// TestFixtureReplay replays every recorded transcript of the real CLI and
// checks what it comes to. A fixture missing from the table fails the test.
func TestFixtureReplay(t *testing.T) {
	t.Parallel()
	type want struct {
		session  string
		status   Status
		category Category
		turns    int
		mcpWarn  bool
	}
	ok := func(session string, turns int) want { return want{session, StatusSuccess, "", turns, false} }
	table := map[string]want{
		"ask_tool.ndjson":                              ok("4b8c04d8-dff9-4cef-a26c-06941a0bc66c", 2),
		"ask_tool_streamjson_answered.ndjson":          ok("c9abb930-63b7-42a1-8a46-154e4a3f509c", 2),
		"ask_tool_streamjson_denied.ndjson":            ok("6649d9ac-bf0b-4b83-946f-8150101bc1b6", 2),
		"ask_tool_streamjson_ppt.ndjson":               ok("4bb63135-e2bb-4dd9-88c3-02f7486d3585", 2),
		"bash_perm_streamjson_ppt.ndjson":              ok("59aeac41-fc87-41ee-83b6-9a9f87d8274a", 2),
		"defer_ask_deferred_streamjson.ndjson":         {"4840fa54-4fca-46cf-b317-9b616cd8f4d9", StatusDeferred, CategoryToolDeferred, 1, false},
		"defer_ask_resume_plain_unavailable.ndjson":    {"4840fa54-4fca-46cf-b317-9b616cd8f4d9", StatusError, CategoryToolDeferredUnavailable, 15, false},
		"defer_ask_resumed_answered_streamjson.ndjson": ok("4840fa54-4fca-46cf-b317-9b616cd8f4d9", 1),
		"defer_bash_deferred.ndjson":                   {"f595336b-e7ec-4efc-bd5a-dbff1aca66fe", StatusDeferred, CategoryToolDeferred, 1, false},
		"defer_bash_resumed_allowed.ndjson":            ok("f595336b-e7ec-4efc-bd5a-dbff1aca66fe", 1),
		"ppt_killed_then_resumed.ndjson":               ok("2fd85a7f-33a3-4627-bde1-906015a5d925", 1),
		"ppt_pending_then_killed.ndjson":               {"2fd85a7f-33a3-4627-bde1-906015a5d925", StatusIncomplete, CategoryNoResult, 0, false},
		"err_401_maxretries0.ndjson":                   {"c969b65c-d175-44d7-a73f-4ffa0fdc9854", StatusError, CategoryAuth, 1, false},
		"err_429_maxretries0.ndjson":                   {"9d576f6f-0d9d-49a6-a340-63b8a34a7381", StatusError, CategoryRateLimit, 1, false},
		"err_429_once.ndjson":                          ok("2c3850b1-366f-4dd2-b353-08d7b8f7b0c6", 1),
		"max_turns1.ndjson":                            {"a877d190-7e2b-423d-be2c-1a9150213863", StatusError, CategoryMaxTurns, 2, false},
		"max_budget.ndjson":                            {"5b0e7c1d-2f3a-4b5c-8d6e-7f8091a2b3c4", StatusError, CategoryMaxBudget, 2, false},
		"resume_cost.ndjson":                           ok("5b0e7c1d-2f3a-4b5c-8d6e-7f8091a2b3c4", 1),
		"mcp_call.ndjson":                              {"a1c7e604-b881-4077-94c7-8d3b5941cb1e", StatusSuccess, "", 2, true},
		"mcp_call_allowed.ndjson":                      {"e48300f5-1a54-48df-8c08-86bd5c61323b", StatusSuccess, "", 2, true},
		"mcp_echo.ndjson":                              ok("c774e39c-9c9c-4b7f-b46f-63d357597014", 1),
		"mcp_missing.ndjson":                           {"339d558c-667c-4125-939b-02fe761a1e70", StatusSuccess, "", 1, true},
		"partial_messages.ndjson":                      ok("98a7560a-8a3b-404d-af88-d7377f9b5622", 2),
		"resume_missing_not_uuid.ndjson":               {"7e151310-39eb-4a21-b656-f8ca0731777f", StatusError, CategorySessionNotFound, 0, false},
		"resume_missing_uuid.ndjson":                   {"00000000-0000-4000-8000-000000000000", StatusError, CategorySessionNotFound, 0, false},
		"session_id_flag.ndjson":                       ok("11111111-2222-4333-8444-555555555555", 1),
		"sigterm.ndjson":                               {"5f4cd0f5-4556-43e1-b517-3d2c360ddd60", StatusIncomplete, CategoryNoResult, 0, false},
		"stream_input.ndjson":                          ok("52edfd5b-f4d1-41f9-ae87-513dbf3093cd", 1),
		"stream_input_multiturn.ndjson":                ok("819e09b5-8dcc-4002-9e0c-329ec6790d5e", 1),
		"tool_bash_allowed.ndjson":                     ok("fb58473e-0d8a-4ba5-9d3d-308b72703fe7", 2),
		"tool_bash_denied.ndjson":                      ok("eea196b2-a964-49e5-aed6-3bde5c02bbd9", 2),
		"tool_bash_noperm.ndjson":                      ok("def561c8-f135-4b36-b43a-84d9cca1ff61", 2),
		"tool_bash_skipperm.ndjson":                    ok("ea83eef9-c80d-44b0-97a6-4f336b87ed77", 2),
		"tool_read.ndjson":                             ok("060a87f9-7c3f-4e62-b601-88e30b341169", 2),
		"turn1.ndjson":                                 ok("74bc29fb-ce4a-433e-bde1-1021a1cd2bf0", 1),
		"turn2.ndjson":                                 ok("74bc29fb-ce4a-433e-bde1-1021a1cd2bf0", 1),
		"output_json.json":                             ok("2f677c47-b7fe-4e3b-87e3-03866e70f229", 1),
	}
	files := append(fixtureFiles(t), filepath.Join(fixtureDir(), "output_json.json"))
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w, found := table[name]
			if !found {
				t.Fatalf("fixture %s has no expected outcome in this test", name)
			}
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			o, err := Replay(fh, ReaderOptions{}, nil)
			if err != nil {
				t.Fatalf("Replay: %v", err)
			}
			if o.SessionID != w.session || o.Status != w.status || o.Category != w.category || o.NumTurns != w.turns {
				t.Errorf("got session %s status %s category %q turns %d; want %s %s %q %d",
					o.SessionID, o.Status, o.Category, o.NumTurns, w.session, w.status, w.category, w.turns)
			}
			if o.MalformedLines != 0 || o.OversizeLines != 0 {
				t.Errorf("skipped lines in a real transcript: %v", o.Diagnostics)
			}
			hasMCPWarn := false
			for _, warn := range o.Warnings {
				if strings.HasPrefix(warn, "mcp:") {
					hasMCPWarn = true
				}
			}
			if hasMCPWarn != w.mcpWarn {
				t.Errorf("mcp warning %v, want %v: %q", hasMCPWarn, w.mcpWarn, o.Warnings)
			}
			if w.status == StatusSuccess && o.FinalText == "" {
				t.Error("no final text")
			}
			if w.status == StatusError && (o.Error == "" || o.FullError == "") {
				t.Error("no error text")
			}
		})
	}
}

// TestFixtureDetails checks fields the run loop relies on.
func TestFixtureDetails(t *testing.T) {
	t.Parallel()
	sum := func(name string) Outcome {
		t.Helper()
		b := readFixture(t, filepath.Join(fixtureDir(), name))
		o, err := Replay(bytes.NewReader(b), ReaderOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := sum("turn1.ndjson")
	if !strings.Contains(o.FinalText, "<!--QUESTION:") || o.CostUSD != 0.0008 || o.Usage.InputTokens != 100 ||
		o.Usage.OutputTokens != 20 || o.APIKeySource != "ANTHROPIC_API_KEY" || o.Model != "claude-opus-5-5" || o.ExitCode != -1 {
		t.Errorf("turn1: %+v", o)
	}
	o = sum("err_429_maxretries0.ndjson")
	if o.APIErrorStatus != 429 || o.TerminalReason != "api_error" || !strings.Contains(o.Error, "429") {
		t.Errorf("err_429: %+v", o)
	}
	var check bool
	for _, d := range o.Diagnostics {
		check = check || (d.Kind == DiagCheck && d.Code == CodeNormalize)
	}
	if !check {
		t.Errorf("err_429: the Normalize check is not a diagnostic: %v", o.Diagnostics)
	}
	o = sum("max_turns1.ndjson")
	if !strings.Contains(o.Error, "Reached maximum number of turns") {
		t.Errorf("max_turns1 error %q", o.Error)
	}
	o = sum("max_budget.ndjson")
	if !strings.Contains(o.Error, "Reached maximum budget ($0.001)") || o.CostUSD != 0.0016 || o.TurnCostUSD != 0.0016 {
		t.Errorf("max_budget error %q, cost %v / %v", o.Error, o.CostUSD, o.TurnCostUSD)
	}
	// Resumed: total_cost_usd counts the first call's two API calls again;
	// the call's own cost is one API call's.
	o = sum("resume_cost.ndjson")
	if math.Abs(o.CostUSD-0.0024) > 1e-9 || o.TurnCostUSD != 0.0008 {
		t.Errorf("resume_cost cost %v, this call %v; want 0.0024, 0.0008", o.CostUSD, o.TurnCostUSD)
	}
	o = sum("tool_bash_denied.ndjson")
	if len(o.PermissionDenials) != 1 || o.PermissionDenials[0] != "Bash" {
		t.Errorf("denials %q", o.PermissionDenials)
	}
	o = sum("defer_bash_deferred.ndjson")
	if d := o.DeferredToolUse; d == nil || d.ID != "toolu_fake_e2d5ddac50066e5409302946" || d.Name != "Bash" ||
		!strings.Contains(string(d.Input), `"touch made_by_tool.txt"`) || o.TerminalReason != "tool_deferred" || o.Error != "" {
		t.Errorf("defer_bash_deferred: %+v deferred %+v", o, o.DeferredToolUse)
	}
	o = sum("defer_ask_deferred_streamjson.ndjson")
	if d := o.DeferredToolUse; d == nil || d.Name != "AskUserQuestion" || !strings.Contains(string(d.Input), "Which auth method should I use?") {
		t.Errorf("defer_ask_deferred_streamjson: deferred %+v", o.DeferredToolUse)
	}
	o = sum("defer_ask_resume_plain_unavailable.ndjson")
	if d := o.DeferredToolUse; d == nil || d.Name != "AskUserQuestion" || !strings.Contains(o.Error, "isn't available") {
		t.Errorf("defer_ask_resume_plain_unavailable: error %q deferred %+v", o.Error, o.DeferredToolUse)
	}
	o = sum("defer_bash_resumed_allowed.ndjson")
	if o.DeferredToolUse != nil {
		t.Errorf("defer_bash_resumed_allowed: deferred %+v after the call ran", o.DeferredToolUse)
	}
	o = sum("mcp_missing.ndjson")
	if len(o.MCPServers) != 1 || o.MCPServers[0] != (MCPServer{"ghost", "failed"}) {
		t.Errorf("mcp servers %+v", o.MCPServers)
	}
}
