package executor

import (
	"strings"
	"testing"
)

func TestClassifyError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text string
		want Category
	}{
		{"API Error: Request rejected (429) · Rate limit exceeded", CategoryRateLimit},
		{"Rate Limit reached", CategoryRateLimit},
		{"rate-limit", CategoryRateLimit},
		{"429 and also 401 unauthorized", CategoryRateLimit}, // rate limit before auth
		{"Failed to authenticate. API Error: 401", CategoryAuth},
		{"403 Forbidden", CategoryAuth},
		{"Unauthorized", CategoryAuth},
		{"Authentication failed", CategoryAuth},
		{"auth error", CategoryAuth},
		{"set anthropic_api_key", CategoryAuth},
		{"API Error: 500 overloaded", CategoryAPI},
		{"", CategoryAPI},
	} {
		if got := ClassifyError(tc.text); got != tc.want {
			t.Errorf("ClassifyError(%q) = %s, want %s", tc.text, got, tc.want)
		}
	}
}

func summarize(t *testing.T, lines ...string) Outcome {
	t.Helper()
	o, err := Replay(strings.NewReader(strings.Join(lines, "\n")), ReaderOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

const initLine = `{"type":"system","subtype":"init","session_id":"s1","apiKeySource":"ANTHROPIC_API_KEY","mcp_servers":[]}`

func TestOutcomeResults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		lines    []string
		status   Status
		category Category
		errText  string
	}{
		{"success", []string{initLine, resultLine}, StatusSuccess, "", ""},
		{"is_error absent is success", []string{`{"type":"result","subtype":"success","session_id":"s1","result":"ok"}`}, StatusSuccess, "", ""},
		{"is_error string is not an error", []string{`{"type":"result","subtype":"success","is_error":"true","session_id":"s1","result":"ok"}`}, StatusSuccess, "", ""},
		{"is_error 1 is not an error", []string{`{"type":"result","subtype":"success","is_error":1,"session_id":"s1","result":"ok"}`}, StatusSuccess, "", ""},
		{"error without text", []string{`{"type":"result","subtype":"error","is_error":true,"session_id":"s1"}`}, StatusError, CategoryAPI, "API error (no detail)"},
		{"429 text in an error_max_turns result", []string{
			`{"type":"system","subtype":"init","session_id":"abc123","cwd":"/tmp/work"}`,
			`{"type":"assistant","message":{"id":"msg_01","role":"assistant","content":[],"stop_reason":null},"session_id":"abc123"}`,
			`{"type":"result","subtype":"error_max_turns","is_error":true,"result":"API Error: Request rejected (429). Your organization has exceeded the rate limit.","usage":{"input_tokens":1423,"output_tokens":0},"session_id":"abc123"}`,
		}, StatusError, CategoryRateLimit, "429"},
		{"max turns", []string{`{"type":"result","subtype":"error_max_turns","is_error":true,"session_id":"s","errors":["Reached maximum number of turns (1)"]}`}, StatusError, CategoryMaxTurns, "Reached maximum"},
		{"max budget", []string{`{"type":"result","subtype":"error_max_budget_usd","is_error":true,"session_id":"s","terminal_reason":"budget_exhausted","errors":["Reached maximum budget ($0.001)"]}`}, StatusError, CategoryMaxBudget, "Reached maximum budget"},
		{"session not found", []string{`{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"s","errors":["No conversation found with session ID: s"]}`}, StatusError, CategorySessionNotFound, "No conversation found"},
		{"api status wins", []string{`{"type":"result","subtype":"success","is_error":true,"session_id":"s","api_error_status":401,"result":"boom"}`}, StatusError, CategoryAuth, "boom"},
		{"no result", []string{initLine}, StatusIncomplete, CategoryNoResult, "without a result"},
		{"latest result wins", []string{`{"type":"result","subtype":"error","is_error":true,"session_id":"s","result":"x"}`, resultLine}, StatusSuccess, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := summarize(t, tc.lines...)
			if o.Status != tc.status || o.Category != tc.category || !strings.Contains(o.Error, tc.errText) {
				t.Errorf("got %s %q %q", o.Status, o.Category, o.Error)
			}
			if o.Warnings == nil {
				t.Error("nil warnings")
			}
		})
	}
}

func TestOutcomeTruncation(t *testing.T) {
	t.Parallel()
	long := "API Error: 429 " + strings.Repeat("é", 5000)
	o := summarize(t, `{"type":"result","subtype":"success","is_error":true,"session_id":"s","result":"`+long+`"}`)
	if o.Category != CategoryRateLimit || o.FullError != long {
		t.Fatalf("category %s, full error kept %v", o.Category, o.FullError == long)
	}
	if !strings.HasSuffix(o.Error, " ... (truncated)") || len(o.Error) > MaxErrorBytes+len(" ... (truncated)") {
		t.Errorf("error of %d bytes, suffix %q", len(o.Error), o.Error[len(o.Error)-20:])
	}
	if !strings.HasPrefix(long, strings.TrimSuffix(o.Error, " ... (truncated)")) {
		t.Error("truncation split a rune or changed the text")
	}
}

func TestOutcomeSessionLatest(t *testing.T) {
	t.Parallel()
	o := summarize(t, initLine, `{"type":"future","sessionId":"s2"}`, `{"type":"control_request"}`)
	if o.SessionID != "s2" {
		t.Errorf("session %q", o.SessionID)
	}
}

func TestOutcomeExit(t *testing.T) {
	t.Parallel()
	feed := func(lines ...string) *Tracker {
		var tr Tracker
		p := &Parser{}
		for _, l := range lines {
			ev, _ := p.ParseLine([]byte(l))
			tr.Observe(ev)
		}
		return &tr
	}
	for _, tc := range []struct {
		name     string
		tr       *Tracker
		exit     Exit
		status   Status
		category Category
	}{
		{"crashed", feed(initLine), Exit{Known: true, Code: 1, Stderr: "boom\n"}, StatusError, CategoryCrashed},
		{"signal", feed(initLine), Exit{Known: true, Code: -1, Signal: "terminated"}, StatusError, CategoryCrashed},
		{"exit 0 no result", feed(initLine), Exit{Known: true}, StatusIncomplete, CategoryNoResult},
		{"stderr session not found", feed(), Exit{Known: true, Code: 1, Stderr: "No conversation found with session ID: x"}, StatusError, CategorySessionNotFound},
		{"cancelled", feed(initLine), Exit{Known: true, Code: 130, Stop: CategoryCancelled}, StatusError, CategoryCancelled},
		{"cancel beats a later result", feed(initLine, resultLine), Exit{Known: true, Stop: CategoryCancelled}, StatusError, CategoryCancelled},
		{"result before stop decides", feed(initLine, resultLine), Exit{Known: true, Code: -1, Signal: "killed", Stop: CategoryCancelled, ResultBeforeStop: true}, StatusSuccess, ""},
		{"idle", feed(initLine), Exit{Known: true, Stop: CategoryIdleTimeout}, StatusError, CategoryIdleTimeout},
		{"not found", feed(), Exit{Stop: CategoryCLINotFound, StopDetail: "agent CLI not found"}, StatusError, CategoryCLINotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := tc.tr.Outcome(tc.exit)
			if o.Status != tc.status || o.Category != tc.category {
				t.Errorf("got %s %q (%s)", o.Status, o.Category, o.Error)
			}
		})
	}
}

func TestHeuristics(t *testing.T) {
	t.Parallel()
	asst := func(text, stop string, tools ...string) string {
		blocks := `{"type":"text","text":"` + text + `"}`
		for _, tl := range tools {
			blocks += `,` + tl
		}
		sr := "null"
		if stop != "" {
			sr = `"` + stop + `"`
		}
		return `{"type":"assistant","session_id":"s","message":{"content":[` + blocks + `],"stop_reason":` + sr + `}}`
	}
	res := func(turns int, extra string) string {
		return `{"type":"result","subtype":"success","is_error":false,"session_id":"s","num_turns":` +
			string(rune('0'+turns)) + `,"result":"r"` + extra + `}`
	}
	bg := `{"type":"tool_use","id":"t","name":"Task","input":{"run_in_background":true}}`
	bgString := `{"type":"tool_use","id":"t","name":"Task","input":{"run_in_background":"true"}}`
	for _, tc := range []struct {
		name  string
		lines []string
		want  string // warning prefix, "" for none
	}{
		{"question at end", []string{asst("Which one?", "end_turn"), res(1, "")}, "interactive-hang:"},
		{"stop reason from result", []string{asst("Which one?", ""), res(1, `,"stop_reason":"end_turn"`)}, "interactive-hang:"},
		{"AskUserQuestion", []string{asst("hm", "end_turn", `{"type":"tool_use","id":"a","name":"AskUserQuestion","input":{}}`), res(1, "")}, "interactive-hang:"},
		{"two turns", []string{asst("Which one?", "end_turn"), res(2, "")}, ""},
		{"statement", []string{asst("Done.", "end_turn"), res(1, "")}, ""},
		{"background task", []string{asst("x", "tool_use", bg), res(2, "")}, "background-task:"},
		{"background task enough turns", []string{asst("x", "tool_use", bg), res(3, "")}, ""},
		{"background strict true", []string{asst("x", "tool_use", bgString), res(1, "")}, ""},
		{"interactive wins", []string{asst("Which one?", "end_turn", bg), res(1, "")}, "interactive-hang:"},
		{"error result: no heuristics", []string{asst("Which one?", "end_turn"), `{"type":"result","subtype":"success","is_error":true,"session_id":"s","num_turns":1,"result":"x"}`}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := summarize(t, tc.lines...)
			var got []string
			for _, w := range o.Warnings {
				if strings.HasPrefix(w, "interactive-hang:") || strings.HasPrefix(w, "background-task:") {
					got = append(got, w)
				}
			}
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("unexpected %q", got)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)):
				t.Errorf("warnings %q, want one %s", got, tc.want)
			}
			if o.Category != "" && tc.want != "" {
				t.Errorf("a heuristic set category %q", o.Category)
			}
		})
	}
}

func TestClawEnvelope(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		out      string
		status   Status
		category Category
		hint     string
		text     string
	}{
		{"success", `{"message":"all done","model":"m","iterations":3,"usage":{"input_tokens":5,"output_tokens":7},"estimated_cost":"$0.0123"}`, StatusSuccess, "", "", "all done"},
		{"pretty with banner", "claw v1\n{\n  \"message\": \"hi\",\n  \"iterations\": 1\n}\n", StatusSuccess, "", "", "hi"},
		{"auth", `{"type":"error","error":"missing Anthropic credentials","kind":"missing_credentials","hint":"Set ANTHROPIC_API_KEY"}`, StatusError, CategoryAuth, "Set ANTHROPIC_API_KEY", ""},
		{"rate limit", `{"type":"error","error":"api failed 429","kind":"api_rate_limit_error","hint":null}`, StatusError, CategoryRateLimit, "", ""},
		{"session", `{"type":"error","error":"session not found: x","kind":"session_not_found"}`, StatusError, CategorySessionNotFound, "", ""},
		{"model error text decides", `{"type":"error","error":"Request rejected (429)","kind":"model_error"}`, StatusError, CategoryAPI, "", ""},
		{"unknown kind text decides", `{"type":"error","error":"rate limit hit","kind":"weird"}`, StatusError, CategoryRateLimit, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := ParseClawEnvelope([]byte(tc.out))
			if err != nil {
				t.Fatal(err)
			}
			var tr Tracker
			tr.Observe(r)
			o := tr.Outcome(Exit{Known: true})
			if o.Status != tc.status || o.Category != tc.category || o.Hint != tc.hint {
				t.Errorf("got %s %q hint %q", o.Status, o.Category, o.Hint)
			}
			if tc.text != "" && o.FinalText != tc.text {
				t.Errorf("final text %q", o.FinalText)
			}
		})
	}
	r, _ := ParseClawEnvelope([]byte(`{"message":"x","iterations":3,"usage":{"input_tokens":5},"estimated_cost":"$0.5"}`))
	if r.NumTurns != 3 || r.TotalCostUSD != 0.5 || r.Usage.InputTokens != 5 {
		t.Errorf("success fields %+v", r)
	}
	for _, bad := range []string{"", "no json here", `{"iterations":1}`, `[1]`} {
		if _, err := ParseClawEnvelope([]byte(bad)); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

func TestBoundedBuffer(t *testing.T) {
	t.Parallel()
	b := newBoundedBuffer(10)
	b.Write([]byte("abc"))
	if b.String() != "abc" {
		t.Errorf("%q", b.String())
	}
	b.Write([]byte("defgh"))
	b.Write([]byte("ijklmnopqrstuvwxyz"))
	s := b.String()
	if !strings.HasPrefix(s, "abcde") || !strings.HasSuffix(s, "vwxyz") || !strings.Contains(s, "16 bytes of stderr dropped") {
		t.Errorf("%q", s)
	}
	b2 := newBoundedBuffer(10)
	for _, c := range "0123456789ABCDEFG" {
		b2.Write([]byte(string(c)))
	}
	if s := b2.String(); !strings.HasPrefix(s, "01234") || !strings.HasSuffix(s, "CDEFG") {
		t.Errorf("%q", s)
	}
}
