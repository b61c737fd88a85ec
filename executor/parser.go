package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrorCode classifies why a line yields no event (seed 002's taxonomy).
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
	// CodeUnknown is reserved by seed 002 and never produced.
	CodeUnknown ErrorCode = "Unknown"
)

// ParseError is why one line yields no event. Msg is redacted: it names what
// is wrong and where (a byte offset, a field), never the line's content.
type ParseError struct {
	Code ErrorCode
	Msg  string
}

func (e *ParseError) Error() string { return "stream-json " + string(e.Code) + ": " + e.Msg }

// Diagnostic is a seed check that a parsed line fails without losing its
// event (the real CLI wins over the seed), or, from a Reader, a line that
// was skipped.
type Diagnostic struct {
	Line int            `json:"line"` // 1-based line number; 0 when unknown
	Kind DiagnosticKind `json:"kind"`
	Code ErrorCode      `json:"code,omitempty"`
	Msg  string         `json:"msg"`
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
	DiagSeed      DiagnosticKind = "seed"      // a seed check the line fails; the event was kept
	DiagMalformed DiagnosticKind = "malformed" // the line was skipped: a ParseError
	DiagOversize  DiagnosticKind = "oversize"  // the line was longer than the cap and skipped
)

// Parser turns stream-json lines into events. The zero value is ready to
// use. A Parser is not safe for concurrent use; it reuses scratch space
// between calls and keeps the diagnostics of the last call.
//
// By default the parser follows the real CLI where it differs from seed 002
// (result subtypes other than "success"/"error", "success" with is_error
// true, a non-boolean is_error): the event is kept and the failed check is a
// Diagnostic. With Strict set, those checks are errors exactly as seed 002
// says.
type Parser struct {
	Strict bool

	sc      scanner
	members []member
	diags   []Diagnostic
	// The init lines of one CLI repeat the same tools list: the last
	// decoded one is reused when the raw JSON is the same.
	lastToolsRaw []byte
	lastTools    []string
	// strs interns the short strings that repeat from line to line
	// (session ids, types, models, tool names) to save allocations.
	strs map[string]string
}

// maxInterned bounds Parser.strs.
const maxInterned = 4096

// istr is jsonString for a value that tends to repeat.
func (p *Parser) istr(v []byte) (string, bool) {
	if len(v) < 2 || len(v) > 130 || v[0] != '"' {
		return jsonString(v)
	}
	in := v[1 : len(v)-1]
	for _, c := range in {
		if c == '\\' || c >= utf8.RuneSelf {
			return jsonString(v)
		}
	}
	if s, ok := p.strs[string(in)]; ok {
		return s, true
	}
	s := string(in)
	if p.strs == nil {
		p.strs = make(map[string]string)
	}
	if len(p.strs) < maxInterned {
		p.strs[s] = s
	}
	return s, true
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
	raw := line[:len(line):len(line)]
	members, isObj, serr := p.sc.topObject(raw, p.members[:0])
	p.members = members[:0]
	if serr != nil {
		return nil, &ParseError{CodeJSONParse, fmt.Sprintf("invalid JSON at byte %d: %s", serr.off, serr.msg)}
	}
	if !isObj {
		return nil, &ParseError{CodeTypedParse, "line is JSON but not an object"}
	}
	return p.typed(raw, members)
}

// ParseJSON types a value that is already JSON: a json.RawMessage or []byte
// holding one JSON document, or any Go value as encoding/json decodes it
// (map[string]any, …), which is re-encoded first. It never reports
// CodeJSONParse: bytes that are not valid JSON, or a value encoding/json
// cannot encode, are CodeTypedParse. For a line L that decodes to V,
// ParseJSON(V) gives the same event type and fields as ParseLine(L), or the
// same error code (seed 002's neutrality); only Raw may differ.
func (p *Parser) ParseJSON(v any) (Event, error) {
	p.diags = p.diags[:0]
	var raw []byte
	switch v := v.(type) {
	case json.RawMessage:
		raw = bytes.Clone(v)
	case []byte:
		raw = bytes.Clone(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, &ParseError{CodeTypedParse, "value cannot be encoded as JSON: " + redactErr(err)}
		}
		raw = b
	}
	members, isObj, serr := p.sc.topObject(raw, p.members[:0])
	p.members = members[:0]
	if serr != nil {
		return nil, &ParseError{CodeTypedParse, fmt.Sprintf("value is not valid JSON (byte %d: %s)", serr.off, serr.msg)}
	}
	if !isObj {
		return nil, &ParseError{CodeTypedParse, "value is not a JSON object"}
	}
	return p.typed(raw, members)
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

func (p *Parser) typed(raw []byte, members []member) (Event, error) {
	var typV, sidV, sidAltV []byte
	for _, m := range members {
		switch string(m.key) {
		case "type":
			typV = m.val
		case "session_id":
			sidV = m.val
		case "sessionId":
			sidAltV = m.val
		}
	}
	typ, ok := p.istr(typV)
	if !ok {
		if typV == nil {
			return nil, &ParseError{CodeTypedParse, `field "type" is missing`}
		}
		return nil, &ParseError{CodeTypedParse, `field "type" is not a string`}
	}
	sid, ok := p.istr(sidV)
	if !ok {
		sid, ok = p.istr(sidAltV)
	}
	switch typ {
	case "system", "user", "assistant", "result", "stream_event":
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
		return p.system(raw, sid, members)
	case "user":
		ev := &UserMessage{}
		ev.setBase(sid, raw)
		for _, m := range members {
			switch string(m.key) {
			case "message":
				ev.Content = p.contentBlocks(field(m.val, "content"))
			case "parent_tool_use_id":
				ev.ParentToolUseID, _ = p.istr(m.val)
			}
		}
		return ev, nil
	case "assistant":
		return p.assistant(raw, sid, members), nil
	case "result":
		return p.result(raw, sid, members)
	default: // stream_event
		return p.streamEvent(raw, sid, members)
	}
}

func (p *Parser) system(raw []byte, sid string, members []member) (Event, error) {
	var subV []byte
	for _, m := range members {
		if string(m.key) == "subtype" {
			subV = m.val
		}
	}
	sub, ok := p.istr(subV)
	if !ok {
		return nil, &ParseError{CodeTypedParse, `system line: "subtype" is missing or not a string`}
	}
	if sub != "init" {
		ev := &SystemOther{Subtype: sub}
		ev.setBase(sid, raw)
		for _, m := range members {
			if string(m.key) == "tool_name" {
				ev.ToolName, _ = p.istr(m.val)
			}
		}
		return ev, nil
	}
	ev := &SystemInit{}
	ev.setBase(sid, raw)
	for _, m := range members {
		switch string(m.key) {
		case "model":
			ev.Model, _ = p.istr(m.val)
		case "cwd":
			ev.CWD, _ = p.istr(m.val)
		case "permissionMode":
			ev.PermissionMode, _ = p.istr(m.val)
		case "apiKeySource":
			ev.APIKeySource, _ = p.istr(m.val)
		case "claude_code_version":
			ev.CLIVersion, _ = p.istr(m.val)
		case "tools":
			ev.Tools = p.tools(m.val)
		case "mcp_servers":
			ev.MCPServers = nil
			eachElem(m.val, func(v []byte) bool {
				if len(v) > 0 && v[0] == '{' {
					var s MCPServer
					s.Name, _ = p.istr(field(v, "name"))
					s.Status, _ = p.istr(field(v, "status"))
					ev.MCPServers = append(ev.MCPServers, s)
				}
				return true
			})
		}
	}
	return ev, nil
}

// tools decodes the init line's tools list, reusing the previous decoding
// when the list is byte for byte the same.
func (p *Parser) tools(v []byte) []string {
	if p.lastToolsRaw != nil && bytes.Equal(v, p.lastToolsRaw) {
		return p.lastTools
	}
	var tools []string
	eachElem(v, func(v []byte) bool {
		if s, ok := jsonString(v); ok {
			tools = append(tools, s)
		}
		return true
	})
	p.lastToolsRaw, p.lastTools = v, tools
	return tools
}

func (p *Parser) assistant(raw []byte, sid string, members []member) *AssistantMessage {
	ev := &AssistantMessage{}
	ev.setBase(sid, raw)
	for _, m := range members {
		switch string(m.key) {
		case "message":
			ev.MessageID, ev.Model, ev.StopReason, ev.Content = "", "", "", nil
			eachMember(m.val, func(k, v []byte) bool {
				switch string(k) {
				case "id":
					ev.MessageID, _ = jsonString(v)
				case "model":
					ev.Model, _ = p.istr(v)
				case "stop_reason":
					ev.StopReason, _ = p.istr(v)
				case "content":
					ev.Content = p.contentBlocks(v)
				}
				return true
			})
		case "parent_tool_use_id":
			ev.ParentToolUseID, _ = p.istr(m.val)
		case "is_api_error_message":
			ev.IsAPIErrorMessage, _ = jsonBool(m.val)
		case "api_error_status":
			n, _ := jsonInt(m.val)
			ev.APIErrorStatus = int(n)
		case "error":
			ev.Error, _ = p.istr(m.val)
		}
	}
	return ev
}

// contentBlocks decodes message.content: a list of blocks, or a plain
// string (one text block). Anything else yields no blocks (seed 000: a
// message without a content list is skipped for text).
func (p *Parser) contentBlocks(v []byte) []ContentBlock {
	if len(v) > 0 && v[0] == '"' {
		s, _ := jsonString(v)
		return []ContentBlock{{Type: "text", Text: s}}
	}
	var out []ContentBlock
	eachElem(v, func(b []byte) bool {
		if len(b) == 0 || b[0] != '{' {
			return true
		}
		var cb ContentBlock
		var id, toolUseID, thinking string
		var hasText bool
		eachMember(b, func(k, v []byte) bool {
			switch string(k) {
			case "type":
				cb.Type, _ = p.istr(v)
			case "text":
				cb.Text, hasText = jsonString(v)
			case "thinking":
				thinking, _ = jsonString(v)
			case "id":
				id, _ = jsonString(v)
			case "tool_use_id":
				toolUseID, _ = jsonString(v)
			case "name":
				cb.ToolName, _ = p.istr(v)
			case "input":
				cb.Input = json.RawMessage(v)
			case "is_error":
				cb.IsError, _ = jsonBool(v)
			case "content":
				cb.Content = json.RawMessage(v)
			}
			return true
		})
		if !hasText {
			cb.Text = thinking
		}
		cb.ToolUseID = toolUseID
		if cb.ToolUseID == "" {
			cb.ToolUseID = id
		}
		out = append(out, cb)
		return true
	})
	return out
}

func (p *Parser) result(raw []byte, sid string, members []member) (Event, error) {
	ev := &Result{}
	ev.setBase(sid, raw)
	var subV, isErrV []byte
	for _, m := range members {
		switch string(m.key) {
		case "subtype":
			subV = m.val
		case "is_error":
			isErrV = m.val
		case "result":
			ev.Text, ev.HasText = jsonString(m.val)
		case "errors":
			ev.Errors = nil
			eachElem(m.val, func(v []byte) bool {
				if s, ok := jsonString(v); ok {
					ev.Errors = append(ev.Errors, s)
				}
				return true
			})
		case "num_turns":
			n, _ := jsonInt(m.val)
			ev.NumTurns = int(n)
		case "total_cost_usd":
			ev.TotalCostUSD, _ = jsonFloat(m.val)
		case "usage":
			ev.Usage = usage(m.val)
		case "duration_ms":
			ev.DurationMS, _ = jsonInt(m.val)
		case "stop_reason":
			ev.StopReason, _ = p.istr(m.val)
		case "terminal_reason":
			ev.TerminalReason, _ = p.istr(m.val)
		case "api_error_status":
			n, _ := jsonInt(m.val)
			ev.APIErrorStatus = int(n)
		case "deferred_tool_use":
			ev.DeferredToolUse = nil
			if len(m.val) > 0 && m.val[0] == '{' {
				d := &DeferredToolUse{}
				d.ID, _ = jsonString(field(m.val, "id"))
				d.Name, _ = p.istr(field(m.val, "name"))
				if in := field(m.val, "input"); in != nil {
					d.Input = json.RawMessage(in)
				}
				ev.DeferredToolUse = d
			}
		case "permission_denials":
			ev.PermissionDenials = nil
			eachElem(m.val, func(v []byte) bool {
				if s, ok := jsonString(field(v, "tool_name")); ok {
					ev.PermissionDenials = append(ev.PermissionDenials, s)
				}
				return true
			})
		}
	}
	sub, ok := p.istr(subV)
	if !ok {
		return nil, &ParseError{CodeTypedParse, `result line: "subtype" is missing or not a string`}
	}
	ev.Subtype = sub
	if sub != "success" && sub != "error" {
		msg := fmt.Sprintf("result subtype %q is neither \"success\" nor \"error\"", clip(sub, 40))
		if p.Strict {
			return nil, &ParseError{CodeTypedParse, msg}
		}
		p.diag(CodeTypedParse, msg)
	}
	if isErrV != nil {
		b, ok := jsonBool(isErrV)
		switch {
		case ok:
			ev.IsError, ev.IsErrorSet = b, true
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
			// Seed 002 defines Normalize for "success"/"error" only.
			if p.Strict && (sub == "success" || sub == "error") {
				return nil, &ParseError{CodeNormalize, msg}
			}
			p.diag(CodeNormalize, msg)
		}
	}
	return ev, nil
}

func usage(v []byte) Usage {
	var u Usage
	eachMember(v, func(k, v []byte) bool {
		switch string(k) {
		case "input_tokens":
			u.InputTokens, _ = jsonInt(v)
		case "output_tokens":
			u.OutputTokens, _ = jsonInt(v)
		case "cache_creation_input_tokens":
			u.CacheCreationInputTokens, _ = jsonInt(v)
		case "cache_read_input_tokens":
			u.CacheReadInputTokens, _ = jsonInt(v)
		}
		return true
	})
	return u
}

func (p *Parser) streamEvent(raw []byte, sid string, members []member) (Event, error) {
	ev := &StreamEvent{}
	ev.setBase(sid, raw)
	var evV []byte
	for _, m := range members {
		switch string(m.key) {
		case "event":
			evV = m.val
		case "parent_tool_use_id":
			ev.ParentToolUseID, _ = p.istr(m.val)
		}
	}
	if len(evV) == 0 || evV[0] != '{' {
		return nil, &ParseError{CodeTypedParse, `stream_event line: "event" is missing or not an object`}
	}
	var typOK bool
	eachMember(evV, func(k, v []byte) bool {
		switch string(k) {
		case "type":
			ev.EventType, typOK = p.istr(v)
		case "index":
			n, _ := jsonInt(v)
			ev.Index = int(n)
		case "delta":
			ev.DeltaType, ev.TextDelta = "", ""
			eachMember(v, func(k, v []byte) bool {
				switch string(k) {
				case "type":
					ev.DeltaType, _ = p.istr(v)
				case "text":
					ev.TextDelta, _ = jsonString(v)
				}
				return true
			})
		}
		return true
	})
	if !typOK {
		return nil, &ParseError{CodeTypedParse, `stream_event line: "event.type" is missing or not a string`}
	}
	ev.Event = json.RawMessage(evV)
	return ev, nil
}

func (p *Parser) diag(code ErrorCode, msg string) {
	p.diags = append(p.diags, Diagnostic{Kind: DiagSeed, Code: code, Msg: msg})
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
