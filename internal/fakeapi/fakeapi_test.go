package fakeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// sseEvent is one decoded Server-Sent Event.
type sseEvent struct {
	Name string
	Data map[string]any
}

// readEvents decodes a whole SSE body, checking that each event's name
// matches its data's type.
func readEvents(t *testing.T, body io.Reader) []sseEvent {
	t.Helper()
	var events []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.Data); err != nil {
				t.Fatalf("event %q: data is not JSON: %v", cur.Name, err)
			}
		case line == "":
			if cur.Name == "" || cur.Data == nil {
				t.Fatalf("incomplete event %+v", cur)
			}
			if cur.Data["type"] != cur.Name {
				t.Fatalf("event %q has data type %v", cur.Name, cur.Data["type"])
			}
			events = append(events, cur)
			cur = sseEvent{}
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read SSE body: %v", err)
	}
	return events
}

// requestBody builds a request body like the CLI's: a system prompt, a user
// message with a reminder before the prompt, and a trailing system entry.
func requestBody(prompt string) string {
	b, _ := json.Marshal(map[string]any{
		"model":  "claude-test",
		"stream": true,
		"system": []map[string]any{{"type": "text", "text": "You are a test."}, {"type": "text", "text": "Be brief."}},
		"messages": []map[string]any{
			{"role": "user", "content": []map[string]any{
				{"type": "text", "text": "<system-reminder>\nToday is a test.\n</system-reminder>"},
				{"type": "text", "text": prompt},
			}},
			{"role": "system", "content": "# Environment"},
		},
	})
	return string(b)
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url+"/v1/messages?beta=true", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func names(events []sseEvent) string {
	var n []string
	for _, e := range events {
		n = append(n, e.Name)
	}
	return strings.Join(n, " ")
}

func TestStreamShape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		reply     Reply
		wantNames string
		wantText  string
		wantStop  string
		wantTool  map[string]any
	}{
		{
			name:      "text",
			reply:     Reply{Text: "Hello, wörld!", Chunks: 3},
			wantNames: "message_start ping content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop",
			wantText:  "Hello, wörld!",
			wantStop:  "end_turn",
		},
		{
			name:      "empty text",
			reply:     Reply{},
			wantNames: "message_start ping content_block_start content_block_delta content_block_stop message_delta message_stop",
			wantStop:  "end_turn",
		},
		{
			name:      "text and tool use",
			reply:     Reply{Text: "Running.", ToolUse: &ToolUse{ID: "toolu_1", Name: "Bash", Input: map[string]any{"command": "echo é"}}},
			wantNames: "message_start ping content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop",
			wantText:  "Running.",
			wantStop:  "tool_use",
			wantTool:  map[string]any{"command": "echo é"},
		},
		{
			name:      "tool use alone",
			reply:     Reply{ToolUse: &ToolUse{Name: "Read"}},
			wantNames: "message_start ping content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop",
			wantStop:  "tool_use",
			wantTool:  map[string]any{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(New(Rule{Reply: tt.reply}))
			defer ts.Close()
			resp := post(t, ts.URL, requestBody("hi"))
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			events := readEvents(t, resp.Body)
			if got := names(events); got != tt.wantNames {
				t.Fatalf("events:\n got %s\nwant %s", got, tt.wantNames)
			}
			msg := events[0].Data["message"].(map[string]any)
			if msg["model"] != "claude-test" || msg["role"] != "assistant" || !strings.HasPrefix(msg["id"].(string), "msg_fake_") {
				t.Errorf("message_start message = %v", msg)
			}

			var text, partial strings.Builder
			var tool map[string]any
			for _, e := range events {
				switch e.Name {
				case "content_block_start":
					if cb := e.Data["content_block"].(map[string]any); cb["type"] == "tool_use" {
						tool = cb
					}
				case "content_block_delta":
					d := e.Data["delta"].(map[string]any)
					switch d["type"] {
					case "text_delta":
						text.WriteString(d["text"].(string))
					case "input_json_delta":
						partial.WriteString(d["partial_json"].(string))
					default:
						t.Errorf("unknown delta type %v", d["type"])
					}
				case "message_delta":
					d := e.Data["delta"].(map[string]any)
					if d["stop_reason"] != tt.wantStop {
						t.Errorf("stop_reason = %v, want %s", d["stop_reason"], tt.wantStop)
					}
					if _, ok := e.Data["usage"].(map[string]any)["output_tokens"]; !ok {
						t.Errorf("message_delta without usage.output_tokens: %v", e.Data)
					}
				}
			}
			if text.String() != tt.wantText {
				t.Errorf("text = %q, want %q", text.String(), tt.wantText)
			}
			if tt.wantTool == nil {
				if tool != nil {
					t.Errorf("unexpected tool_use block %v", tool)
				}
				return
			}
			if tool == nil {
				t.Fatal("no tool_use block")
			}
			if id := tool["id"].(string); id == "" || (tt.reply.ToolUse.ID != "" && id != tt.reply.ToolUse.ID) || (tt.reply.ToolUse.ID == "" && !strings.HasPrefix(id, "toolu_fake_")) {
				t.Errorf("tool_use id = %q", id)
			}
			if tool["name"] != tt.reply.ToolUse.Name {
				t.Errorf("tool_use name = %v, want %s", tool["name"], tt.reply.ToolUse.Name)
			}
			var input map[string]any
			if err := json.Unmarshal([]byte(partial.String()), &input); err != nil {
				t.Fatalf("partial_json pieces joined %q: %v", partial.String(), err)
			}
			if fmt.Sprint(input) != fmt.Sprint(tt.wantTool) {
				t.Errorf("tool input = %v, want %v", input, tt.wantTool)
			}
		})
	}
}

// replyText posts prompt to url and returns the streamed text.
func replyText(t *testing.T, url, body string) string {
	t.Helper()
	resp := post(t, url, body)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var text strings.Builder
	for _, e := range readEvents(t, resp.Body) {
		if e.Name == "content_block_delta" {
			text.WriteString(e.Data["delta"].(map[string]any)["text"].(string))
		}
	}
	return text.String()
}

func TestRules(t *testing.T) {
	t.Parallel()
	toolResult := func(content any) string {
		b, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]any{
			{"role": "user", "content": "first"},
			{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": "t1", "name": "Bash", "input": map[string]any{}}}},
			{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "t1", "content": content}}},
		}})
		return string(b)
	}
	rules := func() []Rule {
		return []Rule{
			{When: "once", Reply: Reply{Text: "first time"}, Times: 1},
			{When: "once", Reply: Reply{Text: "later"}},
			{When: "echo", Respond: func(r Request) Reply { return Reply{Text: "you said: " + r.LastUserText} }},
			{When: "tool-out", Reply: Reply{Text: "saw the tool output"}},
			{When: "Today is a test", Reply: Reply{Text: "matched the reminder"}},
		}
	}
	tests := []struct {
		name   string
		bodies []string
		want   []string
	}{
		{"no match", []string{requestBody("nothing here")}, []string{DefaultText}},
		{"times", []string{requestBody("once"), requestBody("once"), requestBody("once")}, []string{"first time", "later", "later"}},
		{"respond", []string{requestBody("echo me")}, []string{"you said: echo me"}},
		{"reminder is not matched", []string{requestBody("plain")}, []string{DefaultText}},
		{"tool result string", []string{toolResult("tool-out 1")}, []string{"saw the tool output"}},
		{"tool result blocks", []string{toolResult([]map[string]any{{"type": "text", "text": "tool-out 2"}})}, []string{"saw the tool output"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(New(rules()...))
			defer ts.Close()
			for i, body := range tt.bodies {
				if got := replyText(t, ts.URL, body); got != tt.want[i] {
					t.Errorf("reply %d = %q, want %q", i, got, tt.want[i])
				}
			}
		})
	}
	t.Run("any", func(t *testing.T) {
		t.Parallel()
		ts := httptest.NewServer(New(Rule{Reply: Reply{Text: "always"}}))
		defer ts.Close()
		if got := replyText(t, ts.URL, requestBody("whatever")); got != "always" {
			t.Errorf("reply = %q, want always", got)
		}
	})
}

// TestTimesConcurrent checks that a rule with Times answers exactly that
// many requests when they arrive at once.
func TestTimesConcurrent(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(New(Rule{Reply: Reply{Text: "winner"}, Times: 2}))
	defer ts.Close()
	const n = 10
	got := make(chan string, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := http.Post(ts.URL+"/v1/messages", "application/json", strings.NewReader(requestBody("race")))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Error(err)
				return
			}
			got <- string(b)
		})
	}
	wg.Wait()
	close(got)
	winners := 0
	for text := range got {
		if strings.Contains(text, `"text":"winner"`) {
			winners++
		}
	}
	if winners != 2 {
		t.Errorf("%d requests got the Times: 2 reply, want 2", winners)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		reply      Reply
		wantStatus int
		wantType   string
		wantMsg    string
		wantRetry  bool
		wantLogged int
	}{
		{name: "429", reply: Reply{Status: 429}, wantStatus: 429, wantType: "rate_limit_error", wantMsg: "fake 429 error", wantRetry: true, wantLogged: 1},
		{name: "401", reply: Reply{Status: 401, Text: "bad key"}, wantStatus: 401, wantType: "authentication_error", wantMsg: "bad key", wantLogged: 1},
		{name: "500", reply: Reply{Status: 500}, wantStatus: 500, wantType: "api_error", wantLogged: 1},
		{name: "529", reply: Reply{Status: 529}, wantStatus: 529, wantType: "overloaded_error", wantLogged: 1},
		{name: "418 unknown type", reply: Reply{Status: 418}, wantStatus: 418, wantType: "api_error", wantLogged: 1},
		{name: "status not an error", reply: Reply{Status: 42}, wantStatus: 500, wantType: "api_error", wantMsg: "fakeapi: Reply.Status 42 is not an HTTP error status (400-599)", wantLogged: 1},
		{name: "unknown path", method: "GET", path: "/v1/models", wantStatus: 404, wantType: "not_found_error"},
		{name: "count tokens", path: "/v1/messages/count_tokens", wantStatus: 404, wantType: "not_found_error"},
		{name: "wrong method", method: "GET", path: "/v1/messages", wantStatus: 405, wantType: "invalid_request_error"},
		{name: "bad json", body: "{", wantStatus: 400, wantType: "invalid_request_error", wantLogged: 1},
		{name: "bad content", body: `{"messages":[{"role":"user","content":42}]}`, wantStatus: 400, wantType: "invalid_request_error", wantLogged: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := New(Rule{Reply: tt.reply})
			ts := httptest.NewServer(f)
			defer ts.Close()
			method, path, body := tt.method, tt.path, tt.body
			if method == "" {
				method = "POST"
			}
			if path == "" {
				path = "/v1/messages"
			}
			if body == "" {
				body = requestBody("hi")
			}
			req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if got := resp.Header.Get("Retry-After") != ""; got != tt.wantRetry {
				t.Errorf("retry-after present = %v, want %v", got, tt.wantRetry)
			}
			var e struct {
				Type  string
				Error struct{ Type, Message string }
			}
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatalf("error body: %v", err)
			}
			if e.Type != "error" || e.Error.Type != tt.wantType || e.Error.Message == "" {
				t.Errorf("error body = %+v, want type error/%s and a message", e, tt.wantType)
			}
			if tt.wantMsg != "" && e.Error.Message != tt.wantMsg {
				t.Errorf("message = %q, want %q", e.Error.Message, tt.wantMsg)
			}
			if n := len(f.Requests()); n != tt.wantLogged {
				t.Errorf("%d requests logged, want %d", n, tt.wantLogged)
			}
		})
	}
}

func TestRequestLog(t *testing.T) {
	t.Parallel()
	f := New()
	ts := httptest.NewServer(f)
	defer ts.Close()
	body := requestBody("log me")
	replyText(t, ts.URL, body)
	reqs := f.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests logged, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Model != "claude-test" || r.System != "You are a test.\nBe brief." || r.LastUserText != "log me" || string(r.Body) != body || r.Time.IsZero() {
		t.Errorf("logged request = %+v", r)
	}
	if len(r.Messages) != 2 || r.Messages[1].Role != "system" || r.Messages[1].Text() != "# Environment" {
		t.Errorf("messages = %+v", r.Messages)
	}
	// The log is a copy.
	reqs[0].Model = "changed"
	if f.Requests()[0].Model != "claude-test" {
		t.Error("Requests returned the log itself, not a copy")
	}
}

func TestParseRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		body        string
		wantLast    string
		wantResults []string
		wantSystem  string
		wantErr     string
	}{
		{name: "string content", body: `{"messages":[{"role":"user","content":"hello"}]}`, wantLast: "hello"},
		{name: "string system", body: `{"system":"sys","messages":[]}`, wantSystem: "sys"},
		{name: "no user", body: `{"messages":[{"role":"assistant","content":"x"}]}`},
		{name: "last user wins", body: `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"},{"role":"system","content":"d"}]}`, wantLast: "c"},
		{name: "reminder kept inside text", body: `{"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>r</system-reminder> and more"}]}]}`, wantLast: "<system-reminder>r</system-reminder> and more"},
		{name: "two reminders kept", body: `{"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>a</system-reminder><system-reminder>b</system-reminder>"}]}]}`, wantLast: "<system-reminder>a</system-reminder><system-reminder>b</system-reminder>"},
		{name: "tool results", body: `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"one"},{"type":"tool_result","tool_use_id":"b","content":[{"type":"text","text":"two"},{"type":"image"}],"is_error":true},{"type":"text","text":"go on"}]}]}`, wantLast: "one\ntwo\ngo on", wantResults: []string{"one", "two"}},
		{name: "null content", body: `{"messages":[{"role":"user","content":null}]}`},
		{name: "not json", body: `nope`, wantErr: "decode request body"},
		{name: "bad system", body: `{"system":7}`, wantErr: "decode system"},
		{name: "bad message", body: `{"messages":[{"role":"user","content":"ok"},{"role":"user","content":{}}]}`, wantErr: "decode messages[1].content"},
		{name: "bad tool result", body: `{"messages":[{"role":"user","content":[{"type":"tool_result","content":3}]}]}`, wantErr: "block 0: tool_result content"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := parseRequest([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.LastUserText != tt.wantLast || r.System != tt.wantSystem || fmt.Sprint(r.ToolResults) != fmt.Sprint(tt.wantResults) {
				t.Errorf("got last %q, system %q, results %q; want %q, %q, %q", r.LastUserText, r.System, r.ToolResults, tt.wantLast, tt.wantSystem, tt.wantResults)
			}
		})
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(requestBody("hello")))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"x"}]}]}]}`))
	f.Add([]byte(`{"system":"s","messages":[{"role":"user","content":"hi"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parseRequest(body)
		if err != nil {
			return
		}
		for _, tr := range r.ToolResults {
			if !strings.Contains(r.LastUserText, tr) {
				t.Errorf("tool result %q missing from LastUserText %q", tr, r.LastUserText)
			}
		}
	})
}

func TestSplit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		n    int
		want []string
	}{
		{"", 0, []string{""}},
		{"", 5, []string{""}},
		{"abc", 0, []string{"abc"}},
		{"abc", -1, []string{"abc"}},
		{"abcd", 2, []string{"ab", "cd"}},
		{"abc", 10, []string{"a", "b", "c"}},
		{"héllo", 5, []string{"h", "é", "l", "l", "o"}},
		{"日本語です", 2, []string{"日本", "語です"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%d", tt.s, tt.n), func(t *testing.T) {
			if got := split(tt.s, tt.n); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("split(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
			}
		})
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("hello, world", 3)
	f.Add("日本語", 2)
	f.Add("\xff\xfe", 2)
	f.Fuzz(func(t *testing.T, s string, n int) {
		pieces := split(s, n)
		if strings.Join(pieces, "") != s {
			t.Fatalf("split(%q, %d) = %q: joined differs", s, n, pieces)
		}
		if len(pieces) < 1 || (n > 1 && len(pieces) > n) || (n <= 1 && len(pieces) != 1) {
			t.Fatalf("split(%q, %d) gave %d pieces", s, n, len(pieces))
		}
		if len(pieces) > 1 {
			for _, p := range pieces {
				if p == "" {
					t.Fatalf("split(%q, %d) = %q: empty piece", s, n, pieces)
				}
			}
		}
	})
}

// TestSlowStreamClientGone checks that a slow reply ends as soon as its
// client goes away, instead of holding a goroutine for the whole delay.
func TestSlowStreamClientGone(t *testing.T) {
	t.Parallel()
	f := New(Rule{Reply: Reply{Text: "never finished", Chunks: 3, ChunkDelay: time.Hour}})
	handlerDone := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		f.ServeHTTP(w, r)
	}))
	defer ts.Close()

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/messages", strings.NewReader(requestBody("slow")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The stream has started: message_start arrives before the first pause.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: message_start\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	cancel()
	select {
	case <-handlerDone:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler still runs 30 s after its client went away")
	}
}

// TestStartClose runs the server on a real port and checks that Close ends a
// stream in flight and stops listening.
func TestStartClose(t *testing.T) {
	t.Parallel()
	f := New(Rule{When: "slow", Reply: Reply{Text: "never finished", ChunkDelay: time.Hour}})
	base, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Errorf("base URL %q", base)
	}
	if _, err := f.Start("127.0.0.1:0"); err == nil {
		t.Error("second Start succeeded, want an error")
	}
	if got := replyText(t, base, requestBody("fast")); got != DefaultText {
		t.Errorf("reply = %q, want %q", got, DefaultText)
	}

	resp := post(t, base, requestBody("slow"))
	if _, err := f.WaitRequests(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	readDone := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		readDone <- err
	}()
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case <-readDone:
	case <-time.After(30 * time.Second):
		t.Fatal("a stream in flight still runs 30 s after Close")
	}
	if err := f.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := http.Post(base+"/v1/messages", "application/json", strings.NewReader(requestBody("x"))); err == nil {
		t.Error("the server still answers after Close")
	}
	if _, err := f.Start("127.0.0.1:0"); err == nil {
		t.Error("Start after Close succeeded, want an error")
	}
	if _, err := New().Start("256.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "listen on 256.0.0.1:0") {
		t.Errorf("Start on a bad address: %v, want a listen error naming it", err)
	}
}

func TestWaitRequests(t *testing.T) {
	t.Parallel()
	f := New()
	ts := httptest.NewServer(f)
	defer ts.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := f.WaitRequests(ctx, 1); err == nil {
		t.Error("WaitRequests without requests returned no error")
	}

	got := make(chan []Request, 1)
	go func() {
		reqs, err := f.WaitRequests(t.Context(), 1)
		if err != nil {
			t.Error(err)
		}
		got <- reqs
	}()
	replyText(t, ts.URL, requestBody("wake up"))
	select {
	case reqs := <-got:
		if len(reqs) != 1 || reqs[0].LastUserText != "wake up" {
			t.Errorf("WaitRequests = %+v", reqs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitRequests did not return after a request")
	}
}

func TestOfflineEnv(t *testing.T) {
	t.Parallel()
	env := OfflineEnv("http://127.0.0.1:1", "some-home")
	if env["HOME"] != "some-home" || env["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:1" || env["CLAUDE_CODE_MAX_RETRIES"] != "0" || env["ANTHROPIC_API_KEY"] == "" {
		t.Errorf("OfflineEnv = %v", env)
	}
	for k := range env {
		if k == "CLAUDECODE" || k == "CLAUDE_CODE_ENTRYPOINT" {
			t.Errorf("OfflineEnv sets %s", k)
		}
	}
}

func BenchmarkTextReply(b *testing.B) {
	ts := httptest.NewServer(New(Rule{Reply: Reply{Text: strings.Repeat("word ", 200), Chunks: 20}}))
	defer ts.Close()
	body := requestBody("bench")
	b.ReportAllocs()
	for b.Loop() {
		resp, err := http.Post(ts.URL+"/v1/messages", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func BenchmarkParseRequest(b *testing.B) {
	// A request like the CLI's late in a session: a long system prompt and
	// many turns.
	msgs := []map[string]any{}
	for i := range 50 {
		msgs = append(msgs,
			map[string]any{"role": "user", "content": []map[string]any{{"type": "text", "text": strings.Repeat("user text ", 50)}, {"type": "tool_result", "tool_use_id": fmt.Sprint(i), "content": strings.Repeat("out ", 100)}}},
			map[string]any{"role": "assistant", "content": []map[string]any{{"type": "text", "text": strings.Repeat("reply ", 50)}}})
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "system": strings.Repeat("system ", 3000), "messages": msgs})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}
