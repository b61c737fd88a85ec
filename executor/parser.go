package executor

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// ErrorCode classifies why a line yields no event (docs/claude-cli.md).
type ErrorCode string

const (
	// CodeJSONParse: the line is not JSON. Only ParseLine reports it.
	CodeJSONParse ErrorCode = "JsonParse"
	// CodeTypedParse: the line is JSON but a path a known type requires is
	// missing or of the wrong kind (or the line is not an object).
	CodeTypedParse ErrorCode = "TypedParse"
	// CodeNormalize: a result's subtype and is_error disagree. The real CLI
	// does this on every API error, so it is an error only for a strict
	// Parser; otherwise it is a Diagnostic.
	CodeNormalize ErrorCode = "Normalize"
	// CodeUnknown is reserved for a failure none of the above names; it is
	// never produced.
	CodeUnknown ErrorCode = "Unknown"
)

// ParseError is why one line yields no event. Msg is redacted: it names what
// is wrong and where (a byte offset, a field), never the line's content.
type ParseError struct {
	Code ErrorCode
	Msg  string
}

func (e *ParseError) Error() string { return "stream-json " + string(e.Code) + ": " + e.Msg }

// Diagnostic is a check that a parsed line fails without losing its event
// (the real CLI wins over the strict stream shape), or, from a Reader, a
// line that was skipped.
type Diagnostic struct {
	Line int            `json:"line"` // 1-based line number; 0 when unknown
	Kind DiagnosticKind `json:"kind"`
	Code ErrorCode      `json:"code,omitempty"`
	Msg  string         `json:"msg"`
	// Bytes and Prefix describe a DiagOversize line: its length and its
	// first bytes (at most SkippedPrefixBytes; untrusted, clean before
	// printing).
	Bytes  int64  `json:"bytes,omitempty"`
	Prefix string `json:"prefix,omitempty"`
}

func (d Diagnostic) String() string {
	s := fmt.Sprintf("line %d: %s", d.Line, d.Kind)
	if d.Code != "" {
		s += " " + string(d.Code)
	}
	return s + ": " + d.Msg
}

// DiagnosticKind says what a Diagnostic is about.
type DiagnosticKind string

const (
	DiagCheck     DiagnosticKind = "check"     // a check the line fails; the event was kept
	DiagMalformed DiagnosticKind = "malformed" // the line was skipped: a ParseError
	DiagOversize  DiagnosticKind = "oversize"  // the line was longer than the cap and skipped
)

// Parser turns stream-json lines into events. The zero value is ready to
// use. A Parser is not safe for concurrent use; it keeps the diagnostics of
// the last call.
//
// By default the parser follows the real CLI where it departs from the
// strict stream shape (result subtypes other than "success"/"error",
// "success" with is_error true, a non-boolean is_error): the event is kept
// and the failed check is a Diagnostic. With Strict set, those checks are
// errors: TypedParse, or Normalize when subtype "success"/"error" and
// is_error disagree.
type Parser struct {
	Strict bool

	diags []Diagnostic
}

// Reset forgets the diagnostics of the last call.
func (p *Parser) Reset() { p.diags = p.diags[:0] }

// Diagnostics returns the diagnostics of the last ParseLine or ParseJSON
// call. The slice is reused by the next call.
func (p *Parser) Diagnostics() []Diagnostic { return p.diags }

// ParseLine parses one line (with or without its "\n"). Exactly one trailing
// "\r" is removed; a line of only white space yields (nil, nil); the line is
// not otherwise trimmed. The event keeps a copy of the line, so line may be
// reused after the call.
func (p *Parser) ParseLine(line []byte) (Event, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	return p.parseOwned(bytes.Clone(line))
}

// parseOwned is ParseLine for a line (without "\n") the event may keep.
func (p *Parser) parseOwned(line []byte) (Event, error) {
	p.diags = p.diags[:0]
	line = bytes.TrimSuffix(line, []byte("\r"))
	if isBlank(line) {
		return nil, nil
	}
	ev, err := p.decode(line[:len(line):len(line)])
	if err != nil {
		return nil, err
	}
	return ev, nil
}

// ParseJSON types a value that is already JSON: a json.RawMessage or []byte
// holding one JSON document, or any Go value as encoding/json decodes it
// (map[string]any, …), which is re-encoded first. It never reports
// CodeJSONParse: bytes that are not valid JSON, or a value encoding/json
// cannot encode, are CodeTypedParse. For a line L that decodes to V,
// ParseJSON(V) gives the same event type and fields as ParseLine(L), or the
// same error code: both decode with the same
// decoder, which reads a document and its re-encoding alike. Only Raw may
// differ.
func (p *Parser) ParseJSON(v any) (Event, error) {
	p.diags = p.diags[:0]
	var raw []byte
	switch v := v.(type) {
	case stdjson.RawMessage:
		raw = bytes.Clone(v)
	case []byte:
		raw = bytes.Clone(v)
	default:
		b, err := stdjson.Marshal(v)
		if err != nil {
			return nil, &ParseError{CodeTypedParse, "value cannot be encoded as JSON: " + redactErr(err)}
		}
		raw = b
	}
	ev, err := p.decode(raw)
	if err != nil && err.Code == CodeJSONParse {
		return nil, &ParseError{CodeTypedParse, "value is not valid JSON (" + err.Msg + ")"}
	}
	if err != nil {
		return nil, err
	}
	return ev, nil
}

// redactErr keeps the type part of an encoding error, never a value.
func redactErr(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	return s
}

func isBlank(b []byte) bool {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if !unicode.IsSpace(r) {
			return false
		}
		b = b[size:]
	}
	return true
}

// decode types one JSON document with the JSON decoder (wire.go).
func (p *Parser) decode(raw []byte) (Event, *ParseError) {
	if first := bytes.TrimLeft(raw, " \t\r\n"); len(first) == 0 || first[0] != '{' {
		if stdjson.Valid(raw) {
			return nil, &ParseError{CodeTypedParse, "line is JSON but not an object"}
		}
		return nil, &ParseError{CodeJSONParse, "invalid JSON: not an object"}
	}
	var w wireLine
	if err := json.Unmarshal(raw, &w, decodeOptions); err != nil {
		// Every field is lenient: only the syntax can fail. The message
		// names the offset, never the content.
		msg := "invalid JSON"
		var se *jsontext.SyntacticError
		if errors.As(err, &se) {
			msg = fmt.Sprintf("invalid JSON at byte %d", se.ByteOffset)
		}
		return nil, &ParseError{CodeJSONParse, msg}
	}
	return p.typed(raw, &w)
}

func (p *Parser) typed(raw []byte, w *wireLine) (Event, *ParseError) {
	if !w.Type.ok {
		if !w.Type.set {
			return nil, &ParseError{CodeTypedParse, `field "type" is missing`}
		}
		return nil, &ParseError{CodeTypedParse, `field "type" is not a string`}
	}
	typ := w.Type.s
	sid, ok := w.SessionID.s, w.SessionID.ok
	if !ok {
		sid, ok = w.SessionIDAlt.s, w.SessionIDAlt.ok
	}
	switch typ {
	case "system", "user", "assistant", "result", "stream_event":
	case "control_request", "control_cancel_request":
		return p.control(raw, sid, typ, w)
	default:
		ev := &Unknown{Type: typ}
		ev.setBase(sid, raw)
		return ev, nil
	}
	if !ok {
		return nil, &ParseError{CodeTypedParse, fmt.Sprintf(`%s line: "session_id" is missing or not a string`, typ)}
	}
	switch typ {
	case "system":
		return p.system(raw, sid, w)
	case "user":
		ev := &UserMessage{ParentToolUseID: w.ParentToolUse.s}
		ev.setBase(sid, raw)
		ev.Content = []ContentBlock(w.Message.v.Content)
		return ev, nil
	case "assistant":
		m := &w.Message.v
		ev := &AssistantMessage{
			MessageID:         m.ID.s,
			Model:             m.Model.s,
			StopReason:        m.StopReason.s,
			Content:           []ContentBlock(m.Content),
			ParentToolUseID:   w.ParentToolUse.s,
			IsAPIErrorMessage: w.IsAPIErrorMsg.b,
			APIErrorStatus:    int(w.APIErrorStatus.int()),
			Error:             w.Error.s,
		}
		ev.setBase(sid, raw)
		return ev, nil
	case "result":
		return p.result(raw, sid, w)
	default: // stream_event
		return p.streamEvent(raw, sid, w)
	}
}

func (p *Parser) system(raw []byte, sid string, w *wireLine) (Event, *ParseError) {
	if !w.Subtype.ok {
		return nil, &ParseError{CodeTypedParse, `system line: "subtype" is missing or not a string`}
	}
	if w.Subtype.s != "init" {
		ev := &SystemOther{Subtype: w.Subtype.s, ToolName: w.ToolName.s}
		ev.setBase(sid, raw)
		return ev, nil
	}
	ev := &SystemInit{
		Model:          w.Model.s,
		CWD:            w.CWD.s,
		PermissionMode: w.PermissionMode.s,
		APIKeySource:   w.APIKeySource.s,
		CLIVersion:     w.CLIVersion.s,
		Tools:          strs(w.Tools),
	}
	ev.setBase(sid, raw)
	for _, s := range w.MCPServers {
		if s.ok {
			ev.MCPServers = append(ev.MCPServers, MCPServer{Name: s.v.Name.s, Status: s.v.Status.s})
		}
	}
	return ev, nil
}

func (p *Parser) result(raw []byte, sid string, w *wireLine) (Event, *ParseError) {
	ev := &Result{
		Text:           w.Result.s,
		HasText:        w.Result.ok,
		Errors:         strs(w.Errors),
		NumTurns:       int(w.NumTurns.int()),
		TotalCostUSD:   w.TotalCostUSD.f,
		CostUSD:        sinceLastCost(w.SinceLast, w.TotalCostUSD.f),
		Usage:          w.Usage.v.usage(),
		DurationMS:     w.DurationMS.int(),
		StopReason:     w.StopReason.s,
		TerminalReason: w.TerminalReason.s,
		APIErrorStatus: int(w.APIErrorStatus.int()),
	}
	ev.setBase(sid, raw)
	for _, d := range w.Denials {
		if d.ok && d.v.ToolName.ok {
			ev.PermissionDenials = append(ev.PermissionDenials, d.v.ToolName.s)
		}
	}
	if d := w.Deferred; d.ok {
		ev.DeferredToolUse = &DeferredToolUse{ID: d.v.ID.s, Name: d.v.Name.s}
		if d.v.Input != nil {
			ev.DeferredToolUse.Input = []byte(d.v.Input)
		}
	}
	if !w.Subtype.ok {
		return nil, &ParseError{CodeTypedParse, `result line: "subtype" is missing or not a string`}
	}
	sub := w.Subtype.s
	ev.Subtype = sub
	if sub != "success" && sub != "error" {
		msg := fmt.Sprintf("result subtype %q is neither \"success\" nor \"error\"", clip(sub, 40))
		if p.Strict {
			return nil, &ParseError{CodeTypedParse, msg}
		}
		p.diag(CodeTypedParse, msg)
	}
	if w.IsError.set {
		switch {
		case w.IsError.ok:
			ev.IsError, ev.IsErrorSet = w.IsError.b, true
		case p.Strict:
			return nil, &ParseError{CodeTypedParse, `result line: "is_error" is not a boolean`}
		default:
			p.diag(CodeTypedParse, `"is_error" is not a boolean; treated as absent`)
		}
	}
	if ev.IsErrorSet {
		errorish := sub == "error" || strings.HasPrefix(sub, "error_")
		if (sub == "success" && ev.IsError) || (errorish && !ev.IsError) {
			msg := fmt.Sprintf("result subtype %q with is_error %v", clip(sub, 40), ev.IsError)
			// Normalize is defined for "success"/"error" only.
			if p.Strict && (sub == "success" || sub == "error") {
				return nil, &ParseError{CodeNormalize, msg}
			}
			p.diag(CodeNormalize, msg)
		}
	}
	return ev, nil
}

// control types a control_request (the CLI asks the caller; no session_id)
// or a control_cancel_request (it no longer wants the answer).
func (p *Parser) control(raw []byte, sid, typ string, w *wireLine) (Event, *ParseError) {
	if !w.RequestID.ok || w.RequestID.s == "" {
		return nil, &ParseError{CodeTypedParse, typ + ` line: "request_id" is missing or not a string`}
	}
	if typ == "control_cancel_request" {
		ev := &ControlCancel{RequestID: w.RequestID.s}
		ev.setBase(sid, raw)
		return ev, nil
	}
	// A request without a usable subtype is kept (Subtype ""): the
	// executor answers it with an error response rather than leave the CLI
	// waiting.
	c := &w.Request.v
	ev := &ControlRequest{
		RequestID:               w.RequestID.s,
		Subtype:                 c.Subtype.s,
		ToolName:                c.ToolName.s,
		DisplayName:             c.DisplayName.s,
		ToolUseID:               c.ToolUseID.s,
		Description:             c.Description.s,
		BlockedPath:             c.BlockedPath.s,
		RequiresUserInteraction: c.UserInteraction.b,
	}
	if c.Input != nil {
		ev.Input = []byte(c.Input)
	}
	if c.Suggestions != nil {
		ev.PermissionSuggestions = []byte(c.Suggestions)
	}
	ev.setBase(sid, raw)
	return ev, nil
}

func (p *Parser) streamEvent(raw []byte, sid string, w *wireLine) (Event, *ParseError) {
	ev := &StreamEvent{ParentToolUseID: w.ParentToolUse.s}
	ev.setBase(sid, raw)
	var se jobj[wireStreamEvent]
	if len(w.Event) == 0 || w.Event[0] != '{' || json.Unmarshal(w.Event, &se, decodeOptions) != nil || !se.ok {
		return nil, &ParseError{CodeTypedParse, `stream_event line: "event" is missing or not an object`}
	}
	if !se.v.Type.ok {
		return nil, &ParseError{CodeTypedParse, `stream_event line: "event.type" is missing or not a string`}
	}
	ev.EventType = se.v.Type.s
	ev.Index = int(se.v.Index.int())
	ev.DeltaType, ev.TextDelta = se.v.Delta.v.Type.s, se.v.Delta.v.Text.s
	ev.Event = stdjson.RawMessage(w.Event)
	return ev, nil
}

func (p *Parser) diag(code ErrorCode, msg string) {
	p.diags = append(p.diags, Diagnostic{Kind: DiagCheck, Code: code, Msg: msg})
}

// clip shortens s to at most n bytes for messages.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// sinceLastCost sums the per-model costUSD of a result's
// model_usage_since_last_result; total when it is missing or unreadable.
func sinceLastCost(raw jraw, total float64) float64 {
	if len(raw) == 0 {
		return total
	}
	var m map[string]struct {
		CostUSD *float64 `json:"costUSD"`
	}
	if json.Unmarshal(raw, &m, decodeOptions) != nil || len(m) == 0 {
		return total
	}
	sum := 0.0
	for _, u := range m {
		if u.CostUSD == nil || *u.CostUSD < 0 || math.IsNaN(*u.CostUSD) || math.IsInf(*u.CostUSD, 0) {
			return total
		}
		sum += *u.CostUSD
	}
	return sum
}
