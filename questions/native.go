package questions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kinds of question set: how the model asked (README, "Kinds of question").
const (
	KindMarker   = "marker"   // a <!--QUESTION:…--> block in the model's text
	KindAskTool  = "ask_tool" // the model's AskUserQuestion tool call
	KindApproval = "approval" // a permission request for a tool call
	// KindSecrets is the run's own question, not the model's: its work
	// holds secrets or oversized files, held back from delivery until a
	// person says to deliver without those files or to stop.
	KindSecrets = "secrets"
	// KindLimit is the run's own question too: a turn stopped at the
	// run's budget or turn limit, and the run asks whether to go on.
	KindLimit = "limit"
	// KindCap is the run's own question as well: a spend cap across runs
	// (limits.cost_usd_per_day, …_per_month, a spec's
	// max_cost_usd_per_day) is reached, and the run asks whether to raise
	// it or to stop, before it starts the agent.
	KindCap = "spend_cap"
)

// The options of an approval question, exactly.
const (
	AllowOnce   = "Allow once"
	AllowForRun = "Allow for this run"
	Deny        = "Deny"
)

// ToolCall is the tool call a set of kind ask_tool or approval is about.
type ToolCall struct {
	// ToolUseID is the call's tool_use id: the idempotency key of its
	// decision.
	ToolUseID string `json:"tool_use_id"`
	Tool      string `json:"tool"`
	// Input is the call's input as the model gave it (untrusted).
	Input json.RawMessage `json:"input,omitempty"`
	// Description is the CLI's (the model's) description of the call.
	Description string `json:"description,omitempty"`
}

// KindOf is a set's kind; a set stored before kinds existed is a marker's.
func KindOf(s Set) string {
	if s.Kind == "" {
		return KindMarker
	}
	return s.Kind
}

// ToolSetID is the set ID of a tool call's question: "s" and 11 hex digits
// from the run and the tool_use id, so the same call always gets the same
// set.
func ToolSetID(runID, toolUseID string) string {
	return "s" + idHash(runID+"\x00"+toolUseID, -2, -1, 0)[:11]
}

// NewToolSet builds the set of kind (KindAskTool or KindApproval) for call,
// asked in the run's turn. Question IDs are derived from the run and the
// tool_use id, so they do not collide with a marker set of the same turn.
func NewToolSet(runID string, turn int, kind string, call ToolCall, qs []Question) Set {
	s := NewSet(runID+"\x00"+call.ToolUseID, turn, qs)
	s.ID, s.RunID, s.Kind = ToolSetID(runID, call.ToolUseID), runID, kind
	c := call
	s.Tool = &c
	return s
}

// AskToolSet is the question set of an AskUserQuestion call: its questions
// as the model gave them (header, options with descriptions, multiSelect),
// each also taking a free-text answer (the tool's "Other").
func AskToolSet(runID string, turn int, call ToolCall) (Set, error) {
	qs, err := FromAskUserQuestion(call.Input)
	if err != nil {
		return Set{}, err
	}
	for i := range qs {
		qs[i].FreeText = true
	}
	return NewToolSet(runID, turn, KindAskTool, call, qs), nil
}

// ApprovalSet is the question set of a permission request: one question
// with exactly the options Allow once, Allow for this run and Deny, and a
// free-text answer taken as a refusal with that reason. The call is shown
// readably in the set's Context (ApprovalDetail).
func ApprovalSet(runID string, turn int, call ToolCall) Set {
	q := Question{
		Text:   fmt.Sprintf("Allow %s to run this?", toolLabel(call.Tool)),
		Header: "Approval",
		Options: []Option{
			{Label: AllowOnce, Description: "run this call"},
			{Label: AllowForRun, Description: "run it, and this very call again (the same tool with the same input, nothing else) for the rest of this run"},
			{Label: Deny, Description: "refuse it (add a reason as free text: the model is told)"},
		},
		FreeText: true,
	}
	if call.Description == "" {
		// The model's own description of a Bash call is in its input.
		var in struct {
			Description string `json:"description"`
		}
		_ = json.Unmarshal(call.Input, &in)
		call.Description = in.Description
	}
	s := NewToolSet(runID, turn, KindApproval, call, []Question{q})
	s.Context = ApprovalDetail(call)
	return s
}

func toolLabel(tool string) string {
	if server, name, ok := mcpName(tool); ok {
		return fmt.Sprintf("the MCP tool %s of %s", name, server)
	}
	return tool
}

// mcpName splits "mcp__SERVER__TOOL".
func mcpName(tool string) (server, name string, ok bool) {
	rest, ok := strings.CutPrefix(tool, "mcp__")
	if !ok {
		return "", "", false
	}
	server, name, ok = strings.Cut(rest, "__")
	return server, name, ok && server != "" && name != ""
}

// ApprovalDetail shows a tool call readably (Markdown; every piece is the
// model's, so surfaces clean it before showing it): the Bash command as a
// code block, an Edit as a diff, a Write's file and content, an MCP call's
// arguments, anything else's input as indented JSON; then the description.
func ApprovalDetail(call ToolCall) string {
	var in map[string]any
	_ = json.Unmarshal(call.Input, &in)
	str := func(k string) string { s, _ := in[k].(string); return s }
	var b strings.Builder
	switch {
	case call.Tool == "Bash" && str("command") != "":
		b.WriteString("Command:\n")
		b.WriteString(fence("sh", str("command")))
	case (call.Tool == "Edit" || call.Tool == "MultiEdit") && str("file_path") != "":
		fmt.Fprintf(&b, "Edit of %s:\n", str("file_path"))
		b.WriteString(fence("diff", editDiff(str("old_string"), str("new_string"))))
	case call.Tool == "Write" && str("file_path") != "":
		fmt.Fprintf(&b, "Write %s:\n", str("file_path"))
		b.WriteString(fence("", str("content")))
	default:
		label := "Input"
		if _, _, ok := mcpName(call.Tool); ok {
			label = "Arguments"
		}
		fmt.Fprintf(&b, "%s of %s:\n", label, call.Tool)
		b.WriteString(fence("json", prettyJSON(call.Input)))
	}
	if d := strings.TrimSpace(call.Description); d != "" {
		b.WriteString("\nDescription: " + oneLine(d) + "\n")
	}
	if hidesText(string(call.Input)) {
		// What every surface removes before showing text (Printable) would
		// make the call look other than it is: it is written out too, with
		// nothing left to remove.
		b.WriteString("\n⚠ Part of this call does not show as text (terminal escapes, invisible characters or an HTML comment). Its input, written out exactly:\n")
		b.WriteString(fence("", visibleQuote(call.Input)))
	}
	return b.String()
}

// hidesText says whether Printable would remove part of s: an escape or
// control character, an invisible one, or an HTML comment's start. The
// input is JSON as the model wrote it, so the characters may be written
// as \u escapes: it is decoded first.
func hidesText(raw string) bool {
	var v any
	if json.Unmarshal([]byte(raw), &v) != nil {
		v = raw
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case string:
			if strings.Contains(v, "<!--") {
				return true
			}
			for _, r := range strings.ReplaceAll(v, "\r\n", "\n") {
				if r == 0x1b || invisible(r) || r == utf8.RuneError {
					return true
				}
			}
		case []any:
			for _, x := range v {
				if walk(x) {
					return true
				}
			}
		case map[string]any:
			for k, x := range v {
				if walk(k) || walk(x) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// visibleQuote is a JSON input as one ASCII string literal: every control,
// invisible or non-ASCII character written as an escape, "<!--" as
// "<!\x2d-", so that nothing in it can be removed or act on a terminal.
func visibleQuote(raw json.RawMessage) string {
	canon, ok := CanonicalJSON(raw)
	if !ok {
		canon = string(raw)
	}
	return strings.ReplaceAll(strconv.QuoteToASCII(canon), "<!--", `<!\x2d-`)
}

// fence puts s in a Markdown code block whose fence no line of s can close.
func fence(lang, s string) string {
	f := "```"
	for strings.Contains(s, f) {
		f += "`"
	}
	return f + lang + "\n" + strings.TrimRight(s, "\n") + "\n" + f + "\n"
}

// editDiff shows old → new as removed and added lines.
func editDiff(old, new string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(old, "\n"), "\n") {
		b.WriteString("- " + l + "\n")
	}
	for _, l := range strings.Split(strings.TrimRight(new, "\n"), "\n") {
		b.WriteString("+ " + l + "\n")
	}
	return b.String()
}

func prettyJSON(raw json.RawMessage) string {
	var out bytes.Buffer
	if len(raw) == 0 {
		return "{}"
	}
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return string(raw)
	}
	return out.String()
}

// Verdict is what an answer to an approval set decides.
type Verdict struct {
	Allow bool
	// ForRun: the person allowed calls like this one for the rest of the run.
	ForRun bool
	// Reason is a refusal's reason, told to the model ("" when none given).
	Reason string
}

// ApprovalVerdict reads the answer to an approval set: Allow once, Allow
// for this run, or Deny; free text is a refusal with that text as its reason
// (a leading "deny:" is dropped).
func ApprovalVerdict(set Set, resp Response) (Verdict, error) {
	if KindOf(set) != KindApproval || len(set.Questions) != 1 {
		return Verdict{}, fmt.Errorf("set %s is not an approval", set.ID)
	}
	a, ok := resp.Answer(set.Questions[0].ID)
	if !ok {
		return Verdict{}, fmt.Errorf("set %s: no answer to the approval", set.ID)
	}
	reason := strings.TrimSpace(a.Text)
	if r, ok := cutPrefixFold(reason, "deny:"); ok {
		reason = strings.TrimSpace(r)
	}
	if a.Text != "" {
		return Verdict{Reason: reason}, nil
	}
	for _, l := range a.Labels {
		switch l {
		case AllowOnce:
			return Verdict{Allow: true}, nil
		case AllowForRun:
			return Verdict{Allow: true, ForRun: true}, nil
		case Deny:
			return Verdict{}, nil
		}
	}
	return Verdict{}, fmt.Errorf("set %s: the answer chooses none of the approval's options", set.ID)
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// AskToolAnswers is the updatedInput that answers an AskUserQuestion call:
// the call's input with "answers" set to {"<question text>": "<answer>"},
// where the answer is the chosen label, the labels of a multi-select joined
// with ", ", or the free text (after the labels, when both are given).
func AskToolAnswers(set Set, resp Response) (json.RawMessage, error) {
	if KindOf(set) != KindAskTool || set.Tool == nil {
		return nil, fmt.Errorf("set %s is not an AskUserQuestion call", set.ID)
	}
	in := map[string]any{}
	if len(set.Tool.Input) > 0 {
		if err := json.Unmarshal(set.Tool.Input, &in); err != nil || in == nil {
			return nil, fmt.Errorf("set %s: the call's input is not an object", set.ID)
		}
	}
	answers := map[string]string{}
	for _, q := range set.Questions {
		a, ok := resp.Answer(q.ID)
		if !ok {
			return nil, fmt.Errorf("set %s: question %s has no answer", set.ID, q.ID)
		}
		parts := append([]string(nil), a.Labels...)
		if t := strings.TrimSpace(a.Text); t != "" {
			parts = append(parts, t)
		}
		answers[q.Text] = strings.Join(parts, ", ")
	}
	in["answers"] = answers
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("set %s: encode the answers: %w", set.ID, err)
	}
	return b, nil
}

// ToolRule is the rule "Allow for this run" adds for call: that very call
// and nothing broader — "exact:TOOL " and its input as canonical JSON (keys
// sorted, numbers as written), so the same call made again matches it and
// any other input does not. "" when the input is not JSON.
func ToolRule(call ToolCall) string {
	in, ok := CanonicalJSON(call.Input)
	if !ok || call.Tool == "" {
		return ""
	}
	return "exact:" + call.Tool + " " + in
}

// CanonicalJSON is raw re-encoded so that equal values are equal text:
// object keys sorted, no insignificant space, numbers as written, no HTML
// escaping. ok is false when raw is not JSON.
func CanonicalJSON(raw json.RawMessage) (string, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return "", false
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return "", false
	}
	return strings.TrimSuffix(b.String(), "\n"), true
}
