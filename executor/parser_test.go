package executor

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		line    string
		strict  bool
		want    string // event type name, "" for none
		code    ErrorCode
		diag    ErrorCode
		session string
		check   func(t *testing.T, ev Event)
	}{
		{name: "blank", line: "", want: ""},
		{name: "spaces", line: " \t ", want: ""},
		{name: "only CR", line: "\r", want: ""},
		{name: "CR LF blank", line: "\r\n", want: ""},
		{name: "unicode space", line: "\u00a0\u2003", want: ""},
		{name: "not JSON", line: "hello", code: CodeJSONParse},
		{name: "truncated", line: `{"type":"system"`, code: CodeJSONParse},
		{name: "two CRs keep one", line: "{\"type\":\"x\"}\r\r", want: "*executor.Unknown"},
		{name: "leading spaces kept", line: `   {"type":"x"}`, want: "*executor.Unknown"},
		{name: "trailing garbage", line: `{"type":"x"} y`, code: CodeJSONParse},
		{name: "array", line: `[1,2]`, code: CodeTypedParse},
		{name: "scalar", line: `42`, code: CodeTypedParse},
		{name: "missing type", line: `{"session_id":"s"}`, code: CodeTypedParse},
		{name: "type not string", line: `{"type":1,"session_id":"s"}`, code: CodeTypedParse},
		{name: "unknown type", line: `{"type":"keep_alive","request_id":"r"}`, want: "*executor.Unknown",
			check: func(t *testing.T, ev Event) {
				if ev.(*Unknown).Type != "keep_alive" || ev.SessionID() != "" {
					t.Errorf("got %+v", ev)
				}
			}},
		{name: "control request without subtype", line: `{"type":"control_request","request_id":"r"}`, want: "*executor.ControlRequest",
			check: func(t *testing.T, ev Event) {
				if c := ev.(*ControlRequest); c.RequestID != "r" || c.Subtype != "" || ev.SessionID() != "" {
					t.Errorf("got %+v", ev)
				}
			}},
		{name: "control request without request_id", line: `{"type":"control_request","request":{"subtype":"can_use_tool"}}`, code: CodeTypedParse},
		{name: "unknown type with session", line: `{"type":"future","sessionId":"s9"}`, want: "*executor.Unknown", session: "s9"},
		{name: "known type without session", line: `{"type":"assistant","message":{}}`, code: CodeTypedParse},
		{name: "session alias", line: `{"type":"user","sessionId":"s2","message":{"content":"hi"}}`, want: "*executor.UserMessage", session: "s2"},
		{name: "session_id wins over alias", line: `{"type":"user","sessionId":"b","session_id":"a"}`, want: "*executor.UserMessage", session: "a"},
		{name: "session_id not string falls back", line: `{"type":"user","session_id":5,"sessionId":"b"}`, want: "*executor.UserMessage", session: "b"},
		{name: "system without subtype", line: `{"type":"system","session_id":"s"}`, code: CodeTypedParse},
		{name: "system other", line: `{"type":"system","subtype":"api_retry","session_id":"s"}`, want: "*executor.SystemOther"},
		{name: "system init", line: `{"session_id":"s","subtype":"init","type":"system","model":"m","cwd":"/w","apiKeySource":"none","tools":["Bash","Read",3],"mcp_servers":[{"name":"a","status":"failed"}]}`,
			want: "*executor.SystemInit", check: func(t *testing.T, ev Event) {
				in := ev.(*SystemInit)
				if in.Model != "m" || in.CWD != "/w" || in.APIKeySource != "none" ||
					!reflect.DeepEqual(in.Tools, []string{"Bash", "Read"}) ||
					!reflect.DeepEqual(in.MCPServers, []MCPServer{{"a", "failed"}}) {
					t.Errorf("got %+v", in)
				}
			}},
		{name: "init apiKeySource not string", line: `{"type":"system","subtype":"init","session_id":"s","apiKeySource":7}`,
			want: "*executor.SystemInit", check: func(t *testing.T, ev Event) {
				if ev.(*SystemInit).APIKeySource != "" {
					t.Error("non-string apiKeySource kept")
				}
			}},
		{name: "assistant", line: `{"type":"assistant","session_id":"s","message":{"id":"m1","content":[{"type":"text","text":"a\nb"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}},{"type":"text"},{"type":"thinking","thinking":"hm"}],"stop_reason":"end_turn"}}`,
			want: "*executor.AssistantMessage", check: func(t *testing.T, ev Event) {
				m := ev.(*AssistantMessage)
				if m.MessageID != "m1" || m.StopReason != "end_turn" {
					t.Errorf("got %+v", m)
				}
				if got := m.Texts(); !reflect.DeepEqual(got, []string{"a\nb", ""}) {
					t.Errorf("Texts = %q", got)
				}
				tu := m.ToolUses()
				if len(tu) != 1 || tu[0].ToolName != "Bash" || tu[0].ToolUseID != "t1" || string(tu[0].Input) != `{"command":"ls"}` {
					t.Errorf("ToolUses = %+v", tu)
				}
			}},
		{name: "assistant without content list", line: `{"type":"assistant","session_id":"s","message":{"content":5}}`,
			want: "*executor.AssistantMessage", check: func(t *testing.T, ev Event) {
				if len(ev.(*AssistantMessage).Texts()) != 0 {
					t.Error("texts from a non-list content")
				}
			}},
		{name: "assistant message not object", line: `{"type":"assistant","session_id":"s","message":"x"}`, want: "*executor.AssistantMessage"},
		{name: "user tool result", line: `{"type":"user","session_id":"s","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"hi","is_error":true}]}}`,
			want: "*executor.UserMessage", check: func(t *testing.T, ev Event) {
				tr := ev.(*UserMessage).ToolResults()
				if len(tr) != 1 || tr[0].ToolUseID != "t1" || !tr[0].IsError || string(tr[0].Content) != `"hi"` {
					t.Errorf("ToolResults = %+v", tr)
				}
			}},
		{name: "result success", line: `{"type":"result","subtype":"success","is_error":false,"session_id":"s","result":"done","num_turns":2,"total_cost_usd":0.5,"usage":{"input_tokens":10,"output_tokens":"x"}}`,
			want: "*executor.Result", check: func(t *testing.T, ev Event) {
				r := ev.(*Result)
				if r.IsError || !r.IsErrorSet || r.Text != "done" || r.NumTurns != 2 || r.TotalCostUSD != 0.5 || r.Usage.InputTokens != 10 || r.Usage.OutputTokens != 0 {
					t.Errorf("got %+v", r)
				}
			}},
		{name: "result without subtype", line: `{"type":"result","session_id":"s"}`, code: CodeTypedParse},
		{name: "result real CLI api error", line: `{"type":"result","subtype":"success","is_error":true,"session_id":"s","result":"API Error: 429"}`,
			want: "*executor.Result", diag: CodeNormalize},
		{name: "result real CLI api error strict", strict: true, line: `{"type":"result","subtype":"success","is_error":true,"session_id":"s"}`, code: CodeNormalize},
		{name: "result error false strict", strict: true, line: `{"type":"result","subtype":"error","is_error":false,"session_id":"s"}`, code: CodeNormalize},
		{name: "result max turns", line: `{"type":"result","subtype":"error_max_turns","is_error":true,"session_id":"s","errors":["Reached maximum number of turns (1)"]}`,
			want: "*executor.Result", diag: CodeTypedParse},
		{name: "result max turns strict", strict: true, line: `{"type":"result","subtype":"error_max_turns","is_error":true,"session_id":"s"}`, code: CodeTypedParse},
		{name: "result is_error string", line: `{"type":"result","subtype":"success","is_error":"true","session_id":"s"}`,
			want: "*executor.Result", diag: CodeTypedParse, check: func(t *testing.T, ev Event) {
				if r := ev.(*Result); r.IsError || r.IsErrorSet {
					t.Error(`"true" taken as is_error`)
				}
			}},
		{name: "result is_error string strict", strict: true, line: `{"type":"result","subtype":"success","is_error":1,"session_id":"s"}`, code: CodeTypedParse},
		{name: "stream event", line: `{"type":"stream_event","session_id":"s","event":{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"he"}}}`,
			want: "*executor.StreamEvent", check: func(t *testing.T, ev Event) {
				se := ev.(*StreamEvent)
				if se.EventType != "content_block_delta" || se.Index != 1 || se.DeltaType != "text_delta" || se.TextDelta != "he" {
					t.Errorf("got %+v", se)
				}
			}},
		{name: "stream event unknown inner type", line: `{"type":"stream_event","session_id":"s","event":{"type":"brand_new"}}`, want: "*executor.StreamEvent"},
		{name: "stream event without event", line: `{"type":"stream_event","session_id":"s"}`, code: CodeTypedParse},
		{name: "stream event inner type missing", line: `{"type":"stream_event","session_id":"s","event":{"index":0}}`, code: CodeTypedParse},
		{name: "escaped keys", line: `{"\u0074ype":"user","session\u005fid":"s\u00e9","message":{"content":[{"type":"text","text":"\ud83d\ude00 \u003c"}]}}`,
			want: "*executor.UserMessage", session: "sé", check: func(t *testing.T, ev Event) {
				if got := ev.(*UserMessage).Texts(); len(got) != 1 || got[0] != "😀 <" {
					t.Errorf("Texts = %q", got)
				}
			}},
		{name: "duplicate keys last wins", line: `{"type":"nope","type":"user","session_id":"a","session_id":"b"}`, want: "*executor.UserMessage", session: "b"},
		{name: "keys in any order", line: `{"session_id":"s","is_error":false,"num_turns":1,"subtype":"success","type":"result"}`, want: "*executor.Result"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &Parser{Strict: tc.strict}
			ev, err := p.ParseLine([]byte(tc.line))
			if tc.code != "" {
				var pe *ParseError
				if !errors.As(err, &pe) || pe.Code != tc.code {
					t.Fatalf("ParseLine error = %v, want code %s", err, tc.code)
				}
				if ev != nil {
					t.Fatalf("event %T with an error", ev)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseLine: %v", err)
			}
			got := ""
			if ev != nil {
				got = reflect.TypeOf(ev).String()
			}
			if got != tc.want {
				t.Fatalf("event %s, want %s", got, tc.want)
			}
			if ev == nil {
				return
			}
			if tc.session != "" && ev.SessionID() != tc.session {
				t.Errorf("session %q, want %q", ev.SessionID(), tc.session)
			}
			if want := strings.TrimSuffix(strings.TrimSuffix(tc.line, "\n"), "\r"); string(ev.Raw()) != want {
				t.Errorf("Raw = %q, want %q", ev.Raw(), want)
			}
			diags := p.Diagnostics()
			if tc.diag != "" && (len(diags) == 0 || diags[0].Code != tc.diag) {
				t.Errorf("diagnostics %v, want code %s", diags, tc.diag)
			}
			if tc.diag == "" && len(diags) != 0 {
				t.Errorf("unexpected diagnostics %v", diags)
			}
			if tc.check != nil {
				tc.check(t, ev)
			}
		})
	}
}

// TestParseErrorRedacted: error messages never carry the line's content.
func TestParseErrorRedacted(t *testing.T) {
	t.Parallel()
	secret := "sk-ant-SECRET-VALUE"
	lines := []string{
		`{"type":"result","session_id":"s","result":"` + secret + `"`,
		`"` + secret + `"`,
		`{"type":{"k":"` + secret + `"}}`,
		`{"type":"result","session_id":"s","subtype":"error","is_error":"` + secret + `"}`,
		`{"type":"stream_event","session_id":"` + secret + `","event":"` + secret + `"}`,
	}
	for _, strict := range []bool{false, true} {
		p := &Parser{Strict: strict}
		for _, l := range lines {
			_, err := p.ParseLine([]byte(l))
			if err == nil && len(p.Diagnostics()) == 0 {
				t.Fatalf("neither error nor diagnostic for %q", l)
			}
			if err != nil && strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error leaks the line: %v", err)
			}
			for _, d := range p.Diagnostics() {
				if strings.Contains(d.Msg, "SECRET") {
					t.Errorf("diagnostic leaks the line: %v", d)
				}
			}
		}
	}
}

// neutral checks that ParseLine and ParseJSON agree for one line: when L
// decodes to V, ParseJSON(V) agrees with ParseLine(L).
func neutral(t *testing.T, p *Parser, line []byte) {
	t.Helper()
	ev, err := p.ParseLine(line)
	logical := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
	var v any
	if json.Unmarshal(logical, &v) != nil {
		return // L is not JSON: no V
	}
	for _, input := range []any{v, json.RawMessage(logical)} {
		ev2, err2 := p.ParseJSON(input)
		var pe2 *ParseError
		if errors.As(err2, &pe2) && pe2.Code == CodeJSONParse {
			t.Fatalf("ParseJSON emitted JsonParse for %q", line)
		}
		if ev == nil && err == nil {
			continue // blank line: ParseJSON of the value is not compared
		}
		var pe *ParseError
		if err != nil {
			if !errors.As(err, &pe) {
				t.Fatalf("ParseLine error %T", err)
			}
			if pe.Code == CodeJSONParse {
				t.Fatalf("ParseLine JsonParse for a line encoding/json decodes: %q (%v)", line, err)
			}
			if pe2 == nil || pe2.Code != pe.Code {
				t.Fatalf("ParseLine error %v, ParseJSON %v (%T) for %q", err, err2, input, line)
			}
			continue
		}
		if err2 != nil {
			t.Fatalf("ParseLine ok, ParseJSON(%T) error %v for %q", input, err2, line)
		}
		if !sameEvent(ev, ev2) {
			t.Fatalf("ParseLine and ParseJSON(%T) differ for %q:\n%#v\n%#v", input, line, ev, ev2)
		}
	}
}

// sameEvent compares two events field by field, raw JSON semantically.
func sameEvent(a, b Event) bool {
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return false
	}
	return reflect.DeepEqual(normEvent(a), normEvent(b))
}

// normEvent replaces the raw JSON inside an event by its decoded value.
func normEvent(e Event) any {
	norm := func(raw json.RawMessage) any {
		if raw == nil {
			return nil
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return string(raw)
		}
		return v
	}
	blocks := func(bs []ContentBlock) []any {
		var out []any
		for _, b := range bs {
			in, c := b.Input, b.Content
			b.Input, b.Content = nil, nil
			out = append(out, []any{b, norm(in), norm(c)})
		}
		return out
	}
	switch e := e.(type) {
	case *SystemInit:
		c := *e
		c.base = base{sessionID: e.sessionID}
		return c
	case *SystemOther:
		c := *e
		c.base = base{sessionID: e.sessionID}
		return c
	case *AssistantMessage:
		c := *e
		c.base = base{sessionID: e.sessionID}
		c.Content = nil
		return []any{c, blocks(e.Content)}
	case *UserMessage:
		c := *e
		c.base = base{sessionID: e.sessionID}
		c.Content = nil
		return []any{c, blocks(e.Content)}
	case *Result:
		c := *e
		c.base = base{sessionID: e.sessionID}
		c.DeferredToolUse = nil
		if d := e.DeferredToolUse; d != nil {
			return []any{c, d.ID, d.Name, norm(d.Input)}
		}
		return c
	case *StreamEvent:
		c := *e
		c.base = base{sessionID: e.sessionID}
		c.Event = nil
		return []any{c, norm(e.Event)}
	case *Unknown:
		c := *e
		c.base = base{sessionID: e.sessionID}
		return c
	}
	return nil
}

func TestParseNeutrality(t *testing.T) {
	t.Parallel()
	lines := parserSeeds(t)
	for _, strict := range []bool{false, true} {
		p := &Parser{Strict: strict}
		for _, l := range lines {
			neutral(t, p, l)
		}
	}
}

func TestParseJSONNeverJsonParse(t *testing.T) {
	t.Parallel()
	var p Parser
	for _, v := range []any{json.RawMessage(`{"type":`), []byte("nope"), make(chan int), nil, "str", 3.5, []any{1}} {
		_, err := p.ParseJSON(v)
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Code != CodeTypedParse {
			t.Errorf("ParseJSON(%T) = %v, want TypedParse", v, err)
		}
	}
}

// parserSeeds are the fixture lines plus hand-made edge cases.
func parserSeeds(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	for _, f := range fixtureFiles(t) {
		out = append(out, bytes.Split(readFixture(t, f), []byte("\n"))...)
	}
	for _, s := range []string{
		"", " ", "\r", "{}", "[]", "null", `"x"`, "{\"type\":\"x\"}\r", "{\"type\":\"x\"}\r\r",
		`{"type":"result","subtype":"success","is_error":true,"session_id":"s"}`,
		`{"type":"result","subtype":"error","is_error":false,"session_id":"s"}`,
		`{"type":"result","subtype":"error_max_turns","session_id":"s","num_turns":1e2,"total_cost_usd":-0.0}`,
		`{"type":"result","subtype":"x","is_error":null,"session_id":"s","num_turns":1.5}`,
		`{"type":"user","session_id":"s","message":{"content":[{"type":"text","text":5,"thinking":"t"}]}}`,
		`{"type":"user","session_id":"s","message":{"content":[{"type":"text","thinking":"t","text":"x"}]}}`,
		`{"type":"assistant","session_id":"s\ud800x","message":{"content":[{"type":"text","text":"\u00e9\ud83d"}]}}`,
		"{\"type\":\"assistant\",\"session_id\":\"\xff\xfe\",\"message\":{\"id\":\"<&>\"}}",
		`{"type":"stream_event","session_id":"s","event":{"type":"x","index":99999999999999999999}}`,
		`{"type":"system","subtype":"init","session_id":"s","tools":["a"],"tools":["b"],"mcp_servers":[1,{"name":"n"}]}`,
		`{"type":"system","subtype":"init","session_id":"s","tools":["a"]}`,
	} {
		out = append(out, []byte(s))
	}
	return out
}

// FuzzParseLine runs the line parser on arbitrary input: it must never
// panic, must agree with json.Valid on what is JSON, and ParseLine and
// ParseJSON must agree.
func FuzzParseLine(f *testing.F) {
	for _, l := range parserSeeds(f) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, strict := range []bool{false, true} {
			p := &Parser{Strict: strict}
			ev, err := p.ParseLine(line)
			logical := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			var pe *ParseError
			jsonParse := errors.As(err, &pe) && pe.Code == CodeJSONParse
			if !isBlank(logical) && jsonParse == json.Valid(logical) {
				t.Fatalf("JsonParse=%v but json.Valid=%v for %q", jsonParse, json.Valid(logical), logical)
			}
			if ev != nil && !bytes.Equal(ev.Raw(), logical) {
				t.Fatalf("Raw %q, want %q", ev.Raw(), logical)
			}
			neutral(t, p, line)
		}
	})
}

// TestResultCostOfThisCall: on a resumed session total_cost_usd counts the
// session's earlier calls too (measured on 2.1.330); the call's own cost is
// the sum of model_usage_since_last_result's costUSD.
func TestResultCostOfThisCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, since string
		want        float64
	}{
		{"since last result, two models", `,"model_usage_since_last_result":{"a":{"costUSD":0.0016},"b":{"costUSD":0.0004}}`, 0.002},
		{"none: the total", ``, 0.0024},
		{"not an object: the total", `,"model_usage_since_last_result":[1]`, 0.0024},
		{"a model without a cost: the total", `,"model_usage_since_last_result":{"a":{"inputTokens":3}}`, 0.0024},
		{"a negative cost: the total", `,"model_usage_since_last_result":{"a":{"costUSD":-1}}`, 0.0024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := `{"type":"result","subtype":"success","is_error":false,"session_id":"s","result":"ok","total_cost_usd":0.0024` + tc.since + `}`
			ev, err := (&Parser{}).ParseLine([]byte(line))
			if err != nil {
				t.Fatal(err)
			}
			r := ev.(*Result)
			if r.TotalCostUSD != 0.0024 || math.Abs(r.CostUSD-tc.want) > 1e-12 {
				t.Fatalf("total %v, this call %v; want 0.0024, %v", r.TotalCostUSD, r.CostUSD, tc.want)
			}
		})
	}
}
