package questions

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestExcerpt(t *testing.T) {
	if s, cut := Excerpt("short", 10); s != "short" || cut != 0 {
		t.Errorf("short text: %q %d", s, cut)
	}
	long := "FIRST LINE\n" + strings.Repeat("# comment line\n", 400) + "LAST LINE"
	s, cut := Excerpt(long, 1000)
	if !strings.HasPrefix(s, "FIRST LINE\n") || !strings.HasSuffix(s, "LAST LINE") || cut <= 0 {
		t.Fatalf("excerpt %q cut %d", s, cut)
	}
	if want := CutNote(cut); !strings.Contains(s, "\n"+want+"\n") {
		t.Errorf("the excerpt does not say %q:\n%s", want, s)
	}
	if got := len([]rune(s)) - len([]rune(CutNote(cut))) - 1 + cut; got != len([]rune(long)) {
		t.Errorf("shown + cut = %d characters, want %d", got, len([]rune(long)))
	}
	if n := CutNote(3912); n != "… 3,912 characters cut …" {
		t.Errorf("CutNote = %q", n)
	}
	// One very long line is cut inside it, both ends kept.
	s, _ = Excerpt("rm -rf /"+strings.Repeat("x", 5000)+"END", 100)
	if !strings.HasPrefix(s, "rm -rf /") || !strings.HasSuffix(s, "END") {
		t.Errorf("one long line: %q", s)
	}
}

func TestPrintableJSON(t *testing.T) {
	in := json.RawMessage(`{"command":"echo \u001b[2J\u001b]0;pwned\u0007hi","n":1.50,"list":["\u001b[31mred"],"k\u001b[1m":true}`)
	out := PrintableJSON(in)
	if out == nil || strings.Contains(string(out), `\u001b`) || strings.Contains(string(out), "\x1b") {
		t.Fatalf("escapes left: %s", out)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if v["command"] != "echo hi" || v["list"].([]any)[0] != "red" || v["k"] != true || !strings.Contains(string(out), `"n":1.50`) {
		t.Errorf("PrintableJSON = %s", out)
	}
	if PrintableJSON(json.RawMessage(`{"a":`)) != nil {
		t.Error("not JSON: want nil")
	}
}
