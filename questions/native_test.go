package questions

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestAskToolSetAndAnswers(t *testing.T) {
	call := ToolCall{ToolUseID: "toolu_1", Tool: "AskUserQuestion", Input: json.RawMessage(
		`{"questions":[{"question":"Which auth?","header":"Auth","multiSelect":false,"options":[{"label":"OAuth2","description":"o"},{"label":"JWT","description":"j"}]},` +
			`{"question":"Which stores?","header":"Store","multiSelect":true,"options":[{"label":"SQL"},{"label":"Redis"}]}]}`)}
	set, err := AskToolSet("run1", 2, call)
	if err != nil {
		t.Fatal(err)
	}
	if set.ID != ToolSetID("run1", "toolu_1") || set.Kind != KindAskTool || KindOf(set) != KindAskTool || set.Tool.ToolUseID != "toolu_1" {
		t.Errorf("set %+v", set)
	}
	if err := set.Validate(); err != nil {
		t.Fatal(err)
	}
	if !set.Questions[0].FreeText || !set.Questions[1].MultiSelect || set.Questions[0].Options[0].Description != "o" {
		t.Errorf("questions %+v", set.Questions)
	}
	marker := NewSet("run1", 2, set.Questions)
	for i := range set.Questions {
		if set.Questions[i].ID == marker.Questions[i].ID {
			t.Errorf("question %d has the ID of the marker set of the same turn", i)
		}
	}
	a0, err := ParseQuestionAnswer(set.Questions[0], "JWT")
	if err != nil {
		t.Fatal(err)
	}
	a1, err := ParseQuestionAnswer(set.Questions[1], "1,2")
	if err != nil {
		t.Fatal(err)
	}
	b, err := AskToolAnswers(set, Response{Answers: []Answer{a0, a1}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Questions []any             `json:"questions"`
		Answers   map[string]string `json:"answers"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Questions) != 2 || got.Answers["Which auth?"] != "JWT" || got.Answers["Which stores?"] != "SQL, Redis" {
		t.Errorf("updatedInput %s", b)
	}
	other, err := ParseQuestionAnswer(set.Questions[0], "other: mTLS")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = AskToolAnswers(set, Response{Answers: []Answer{other, a1}})
	if !strings.Contains(string(b), `"Which auth?":"mTLS"`) {
		t.Errorf("free text: %s", b)
	}
	if _, err := AskToolSet("run1", 2, ToolCall{ToolUseID: "t", Input: json.RawMessage(`{"questions":[]}`)}); err == nil {
		t.Error("an AskUserQuestion call without questions made a set")
	}
}

func TestApprovalSetAndVerdict(t *testing.T) {
	call := ToolCall{ToolUseID: "toolu_2", Tool: "Bash", Input: json.RawMessage(`{"command":"rm -rf build","description":"clean"}`), Description: "Remove the build dir"}
	set := ApprovalSet("run1", 1, call)
	if err := set.Validate(); err != nil {
		t.Fatal(err)
	}
	q := set.Questions[0]
	if len(q.Options) != 3 || q.Options[0].Label != "Allow once" || q.Options[1].Label != "Allow for this run" || q.Options[2].Label != "Deny" || !q.FreeText {
		t.Errorf("options %+v", q.Options)
	}
	if !strings.Contains(set.Context, "```sh\nrm -rf build\n```") || !strings.Contains(set.Context, "Remove the build dir") {
		t.Errorf("context %q", set.Context)
	}
	for text, want := range map[string]Verdict{
		"Allow once":           {Allow: true},
		"2":                    {Allow: true, ForRun: true},
		"deny":                 {},
		"other: not on prod":   {Reason: "not on prod"},
		"Deny: too dangerous":  {Reason: "too dangerous"},
		"it deletes the cache": {Reason: "it deletes the cache"},
	} {
		a, err := ParseQuestionAnswer(q, text)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		v, err := ApprovalVerdict(set, Response{Answers: []Answer{a}})
		if err != nil || v != want {
			t.Errorf("%q: verdict %+v %v, want %+v", text, v, err, want)
		}
	}
	// "Allow for this run" stores the very call, keys in order.
	if r := ToolRule(call); r != `exact:Bash {"command":"rm -rf build","description":"clean"}` {
		t.Errorf("rule %q", r)
	}
	if r := ToolRule(ToolCall{Tool: "Bash", Input: json.RawMessage(`{"description":"clean", "command":"rm -rf build"}`)}); r != ToolRule(call) {
		t.Errorf("the same input written otherwise gets another rule: %q", r)
	}
	if r := ToolRule(ToolCall{Tool: "Bash", Input: json.RawMessage(`{"command":`)}); r != "" {
		t.Errorf("rule of an input that is not JSON: %q", r)
	}
}

func TestApprovalDetail(t *testing.T) {
	edit := ApprovalDetail(ToolCall{Tool: "Edit", Input: json.RawMessage(`{"file_path":"a.go","old_string":"x := 1","new_string":"x := 2"}`)})
	if !strings.Contains(edit, "```diff\n- x := 1\n+ x := 2\n```") || !strings.Contains(edit, "a.go") {
		t.Errorf("edit %q", edit)
	}
	mcp := ApprovalDetail(ToolCall{Tool: "mcp__db__drop", Input: json.RawMessage(`{"table":"users"}`)})
	if !strings.Contains(mcp, "Arguments of mcp__db__drop") || !strings.Contains(mcp, `"table": "users"`) {
		t.Errorf("mcp %q", mcp)
	}
	// Text the surfaces remove before showing (an HTML comment, escapes,
	// a bidi override) would hide what runs: the input is written out too.
	for _, in := range []string{`{"command":"echo hi <!--\nrm -rf ~\n-->"}`, `{"command":"echo \u001b[8mrm -rf ~"}`, `{"command":"ls \u202e"}`} {
		d := Printable(ApprovalDetail(ToolCall{Tool: "Bash", Input: json.RawMessage(in)}))
		if !strings.Contains(d, "written out exactly") || !strings.Contains(d, "rm -rf ~") && !strings.Contains(d, `\u202e`) {
			t.Errorf("%s shown as:\n%s", in, d)
		}
	}
	if d := ApprovalDetail(ToolCall{Tool: "Bash", Input: json.RawMessage(`{"command":"echo héllo\tworld"}`)}); strings.Contains(d, "written out") {
		t.Errorf("a plain command is written out twice:\n%s", d)
	}
	fenced := ApprovalDetail(ToolCall{Tool: "Bash", Input: json.RawMessage(`{"command":"echo '` + "```" + `'"}`)})
	if !strings.Contains(fenced, "````sh") {
		t.Errorf("a command holding a fence is not fenced longer: %q", fenced)
	}
}
