package executor

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

const resultLine = `{"type":"result","subtype":"success","is_error":false,"session_id":"s1","result":"done","num_turns":1}`

func readAll(t *testing.T, r *Reader) []Event {
	t.Helper()
	var evs []Event
	for r.Next() {
		evs = append(evs, r.Event())
	}
	return evs
}

func TestReaderTolerance(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"type":"system","subtype":"init","session_id":"s0"}`,
		``,
		`   `,
		`not json at all`,
		`[1,2,3]`,
		`{"type":"mystery","session_id":"s0"}`,
		`{"type":"assistant","message":{}}`, // no session id
		"{\"type\":\"user\",\"session_id\":\"s0\",\"message\":{\"content\":\"x\"}}\r",
		resultLine,
		`{"type":"result","subtype":"error_max_turns","is_error":true,"session_id":"s1"}`,
	}, "\n") // no newline at the end: the last line still counts
	r := NewReader(strings.NewReader(in), ReaderOptions{})
	evs := readAll(t, r)
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	var types []string
	for _, e := range evs {
		types = append(types, strings.TrimPrefix(typeName(e), "*executor."))
	}
	if got := strings.Join(types, ","); got != "SystemInit,Unknown,UserMessage,Result,Result" {
		t.Errorf("events %s", got)
	}
	st := r.Stats()
	if st.Lines != 10 || st.BlankLines != 2 || st.MalformedLines != 3 || st.Events != 5 || st.CheckDiagnostics != 1 {
		t.Errorf("stats %+v", st)
	}
	var lines []int
	for _, d := range r.Diagnostics() {
		lines = append(lines, d.Line)
	}
	if want := []int{4, 5, 7, 10}; !equalInts(lines, want) {
		t.Errorf("diagnostic lines %v, want %v (%v)", lines, want, r.Diagnostics())
	}
}

func typeName(e Event) string {
	switch e.(type) {
	case *SystemInit:
		return "*executor.SystemInit"
	case *SystemOther:
		return "*executor.SystemOther"
	case *UserMessage:
		return "*executor.UserMessage"
	case *AssistantMessage:
		return "*executor.AssistantMessage"
	case *Result:
		return "*executor.Result"
	case *StreamEvent:
		return "*executor.StreamEvent"
	case *Unknown:
		return "*executor.Unknown"
	}
	return "?"
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// bigAssistantLine is an assistant line of about n bytes.
func bigAssistantLine(n int) string {
	text := strings.Repeat("x", n)
	b, _ := json.Marshal(map[string]any{
		"type": "assistant", "session_id": "s1",
		"message": map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}},
	})
	return string(b)
}

func TestReaderLongLines(t *testing.T) {
	t.Parallel()
	big := bigAssistantLine(5 << 20)
	in := big + "\n" + resultLine + "\n"
	// One byte at a time for the first reads, to exercise the fragments.
	r := NewReader(iotest.HalfReader(strings.NewReader(in)), ReaderOptions{})
	evs := readAll(t, r)
	if len(evs) != 2 {
		t.Fatalf("%d events, diagnostics %v", len(evs), r.Diagnostics())
	}
	if a := evs[0].(*AssistantMessage); len(a.Texts()[0]) != 5<<20 || len(a.Raw()) != len(big) {
		t.Error("the 5 MB line was not kept whole")
	}
	if _, ok := evs[1].(*Result); !ok {
		t.Errorf("last event %T", evs[1])
	}
}

func TestReaderOversize(t *testing.T) {
	t.Parallel()
	limit := 1000
	for _, tc := range []struct {
		name string
		in   string
		want int // events
	}{
		{"oversize then result", bigAssistantLine(5000) + "\n" + resultLine + "\n", 1},
		{"exactly the cap", strings.Repeat(" ", limit-2) + "{}" + "\n" + resultLine, 1},
		{"oversize last line", resultLine + "\n" + bigAssistantLine(5000), 1},
		{"several", bigAssistantLine(3000) + "\n" + bigAssistantLine(70000) + "\n" + resultLine + "\n" + bigAssistantLine(2000) + "\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := NewReader(strings.NewReader(tc.in), ReaderOptions{MaxLineBytes: limit})
			evs := readAll(t, r)
			if len(evs) != tc.want {
				t.Fatalf("%d events, want %d; %v", len(evs), tc.want, r.Diagnostics())
			}
			over := strings.Count(tc.in, "xxxxxxxxxx\"") // one per big line
			if r.Stats().OversizeLines != over {
				t.Errorf("oversize %d, want %d", r.Stats().OversizeLines, over)
			}
			if r.Stats().MalformedLines != 0 && tc.name != "exactly the cap" {
				t.Errorf("malformed %d", r.Stats().MalformedLines)
			}
		})
	}
}

func TestReaderReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader(resultLine+"\n"), iotest.ErrReader(boom)), ReaderOptions{})
	evs := readAll(t, r)
	if len(evs) != 1 || !errors.Is(r.Err(), boom) {
		t.Errorf("events %d, err %v", len(evs), r.Err())
	}
}

func TestReaderDiagnosticsBounded(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("garbage\n", 500) + resultLine
	r := NewReader(strings.NewReader(in), ReaderOptions{MaxDiagnostics: 10})
	if evs := readAll(t, r); len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
	if len(r.Diagnostics()) != 10 || r.Stats().MalformedLines != 500 {
		t.Errorf("kept %d diagnostics, counted %d", len(r.Diagnostics()), r.Stats().MalformedLines)
	}
	o, _ := Replay(strings.NewReader(in), ReaderOptions{MaxDiagnostics: 10}, nil)
	if o.MalformedLines != 500 || o.Status != StatusSuccess {
		t.Errorf("outcome %+v", o)
	}
}

func TestValidityMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string {
		return `{"type":"x","a":` + strings.Repeat(`{"a":`, n-2) + "1" + strings.Repeat("}", n-1)
	}
	cases := []string{
		deep(10000), deep(10001), deepObj(10000), deepObj(10001),
		`{"a":1.}`, `{"a":01}`, `{"a":-}`, `{"a":1e}`, `{"a":1e+5}`, `{"a":-0.0e-0}`,
		`{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12G4"}`, "{\"a\":\"\t\"}", `{"a":"\/"}`, `{"a":'x'}`,
		`{"a":tru}`, `{"a":nul}`, `{"a":[1,]}`, `{"a":{},}`, `{,}`, `{"a" 1}`, `{"a":1 "b":2}`,
		"{\"a\":\"\xff\"}", "\ufeff{}", `{}  `, "{}\t\n",
	}
	var p Parser
	for _, c := range cases {
		_, err := p.ParseLine([]byte(c))
		var pe *ParseError
		isJSONErr := errors.As(err, &pe) && pe.Code == CodeJSONParse
		if isJSONErr == json.Valid([]byte(c)) {
			t.Errorf("%.40q: JsonParse %v, json.Valid %v", c, isJSONErr, json.Valid([]byte(c)))
		}
	}
	ev, err := p.ParseLine([]byte(`{"type":"user","session_id":"s","message":{"content":"a\u00e9\ud800\ud83d\ude00"}}`))
	if err != nil || ev.(*UserMessage).Texts()[0] != "aé\uFFFD😀" {
		t.Errorf("string decoding differs from encoding/json: %v %+v", err, ev)
	}
}

// FuzzReader checks the Reader against splitting the input on "\n" and
// parsing each line alone, with a small line cap and reads of random
// sizes.
func FuzzReader(f *testing.F) {
	f.Add([]byte(resultLine+"\n\n{\"type\":\"x\"}\r\nbad\n"+resultLine), uint16(200), uint8(7))
	f.Add([]byte(bigAssistantLine(300)+"\n"+resultLine), uint16(64), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, limit uint16, chunk uint8) {
		max := int(limit) + 1
		r := NewReader(iotest.OneByteReader(bytes.NewReader(data)), ReaderOptions{MaxLineBytes: max})
		if chunk%2 == 0 {
			r = NewReader(bytes.NewReader(data), ReaderOptions{MaxLineBytes: max})
		}
		var got []string
		for r.Next() {
			got = append(got, string(r.Event().Raw()))
		}
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		lines := bytes.Split(data, []byte("\n"))
		if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		var want []string
		over := 0
		var p Parser
		for _, l := range lines {
			if len(l) > max {
				over++
				continue
			}
			if ev, err := p.ParseLine(l); err == nil && ev != nil {
				want = append(want, string(ev.Raw()))
			}
		}
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") || r.Stats().OversizeLines != over || r.Stats().Lines != len(lines) {
			t.Fatalf("reader events %q (oversize %d, lines %d), want %q (oversize %d, lines %d)",
				got, r.Stats().OversizeLines, r.Stats().Lines, want, over, len(lines))
		}
	})
}
