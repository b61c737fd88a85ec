package approvals

import (
	"encoding/json"
	"testing"
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
		{"Bash(git push:*)", "Bash", bash("echo; git push"), false},
		{"Bash(npm test)", "Bash", bash("npm test"), true},
		{"Bash(npm test)", "Bash", bash("npm test --all"), false},
		{"Bash(rm -rf *)", "Bash", bash("rm -rf build"), true},
		{"Bash(go test:*)", "Edit", json.RawMessage(`{}`), false},
		{"Edit", "Edit", json.RawMessage(`{"file_path":"/w/a.go"}`), true},
		{"Edit(*.go)", "Edit", json.RawMessage(`{"file_path":"/w/pkg/a.go"}`), true},
		{"Edit(docs/**)", "Edit", json.RawMessage(`{"file_path":"/w/docs/x/y.md"}`), true},
		{"Edit(docs/**)", "Edit", json.RawMessage(`{"file_path":"/w/src/y.md"}`), false},
		{"WebFetch(domain:example.com)", "WebFetch", json.RawMessage(`{"url":"https://example.com/x"}`), true},
		{"WebFetch(domain:example.com)", "WebFetch", json.RawMessage(`{"url":"https://evil.com/example.com"}`), false},
		{"mcp__db", "mcp__db__drop", nil, true},
		{"mcp__db", "mcp__dbx__drop", nil, false},
		{"mcp__db__query", "mcp__db__drop", nil, false},
		{"Bash(", "Bash", bash("x"), false},
	} {
		if got := Match(c.rule, c.tool, c.input); got != c.want {
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
