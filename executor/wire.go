package executor

import (
	"math"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// This file holds the shapes of the stream-json lines as the JSON decoder
// fills them. Each line is decoded by one json.Unmarshal call; every field
// is lenient: a value of an unexpected kind leaves the field unset instead
// of failing the line (the real CLI adds and changes fields from release to
// release). The decoder matches member names exactly (case-sensitively),
// keeps the last of duplicate members, and decodes strings as encoding/json
// does (invalid UTF-8 and lone surrogates become U+FFFD), so decoding a line
// and decoding the re-encoding of its encoding/json value give the same
// fields: ParseLine and ParseJSON agree by construction.

// decodeOptions are the options of every decode: syntax as json.Valid
// accepts it (duplicate names and invalid UTF-8 allowed).
var decodeOptions = json.JoinOptions(
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
)

// wireLine is every top-level member any line type needs.
type wireLine struct {
	Type         jstr `json:"type"`
	SessionID    jstr `json:"session_id"`
	SessionIDAlt jstr `json:"sessionId"`
	Subtype      jstr `json:"subtype"`

	// system init / other
	Model          jstr                  `json:"model"`
	CWD            jstr                  `json:"cwd"`
	PermissionMode jstr                  `json:"permissionMode"`
	APIKeySource   jstr                  `json:"apiKeySource"`
	CLIVersion     jstr                  `json:"claude_code_version"`
	Tools          jlist[jstr]           `json:"tools"`
	MCPServers     jlist[jobj[wireMCP]]  `json:"mcp_servers"`
	ToolName       jstr                  `json:"tool_name"`
	Message        jobj[wireMessage]     `json:"message"`
	ParentToolUse  jstr                  `json:"parent_tool_use_id"`
	IsAPIErrorMsg  jbool                 `json:"is_api_error_message"`
	APIErrorStatus jnum                  `json:"api_error_status"`
	Error          jstr                  `json:"error"`
	IsError        jbool                 `json:"is_error"`
	Result         jstr                  `json:"result"`
	Errors         jlist[jstr]           `json:"errors"`
	NumTurns       jnum                  `json:"num_turns"`
	TotalCostUSD   jnum                  `json:"total_cost_usd"`
	SinceLast      jraw                  `json:"model_usage_since_last_result"`
	Usage          jobj[wireUsage]       `json:"usage"`
	DurationMS     jnum                  `json:"duration_ms"`
	StopReason     jstr                  `json:"stop_reason"`
	TerminalReason jstr                  `json:"terminal_reason"`
	Denials        jlist[jobj[wireDeny]] `json:"permission_denials"`
	Deferred       jobj[wireDeferred]    `json:"deferred_tool_use"`
	Event          jraw                  `json:"event"`

	// control_request / control_cancel_request
	RequestID jstr              `json:"request_id"`
	Request   jobj[wireControl] `json:"request"`
}

type wireControl struct {
	Subtype         jstr  `json:"subtype"`
	ToolName        jstr  `json:"tool_name"`
	DisplayName     jstr  `json:"display_name"`
	Input           jraw  `json:"input"`
	ToolUseID       jstr  `json:"tool_use_id"`
	Description     jstr  `json:"description"`
	Suggestions     jraw  `json:"permission_suggestions"`
	BlockedPath     jstr  `json:"blocked_path"`
	UserInteraction jbool `json:"requires_user_interaction"`
}

type wireMCP struct {
	Name   jstr `json:"name"`
	Status jstr `json:"status"`
}

type wireMessage struct {
	ID         jstr        `json:"id"`
	Model      jstr        `json:"model"`
	StopReason jstr        `json:"stop_reason"`
	Content    wireContent `json:"content"`
}

type wireBlock struct {
	Type      jstr  `json:"type"`
	Text      jstr  `json:"text"`
	Thinking  jstr  `json:"thinking"`
	ID        jstr  `json:"id"`
	ToolUseID jstr  `json:"tool_use_id"`
	Name      jstr  `json:"name"`
	Input     jraw  `json:"input"`
	IsError   jbool `json:"is_error"`
	Content   jraw  `json:"content"`
}

type wireUsage struct {
	InputTokens              jnum `json:"input_tokens"`
	OutputTokens             jnum `json:"output_tokens"`
	CacheCreationInputTokens jnum `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     jnum `json:"cache_read_input_tokens"`
}

type wireDeny struct {
	ToolName jstr `json:"tool_name"`
}

type wireDeferred struct {
	ID    jstr `json:"id"`
	Name  jstr `json:"name"`
	Input jraw `json:"input"`
}

type wireStreamEvent struct {
	Type  jstr            `json:"type"`
	Index jnum            `json:"index"`
	Delta jobj[wireDelta] `json:"delta"`
}

type wireDelta struct {
	Type jstr `json:"type"`
	Text jstr `json:"text"`
}

// jstr is a string member; ok is false when it is absent or not a string,
// set says it was there at all.
type jstr struct {
	s       string
	ok, set bool
}

func (v *jstr) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	*v = jstr{set: true}
	if d.PeekKind() != '"' {
		return d.SkipValue()
	}
	t, err := d.ReadToken()
	if err != nil {
		return err
	}
	*v = jstr{t.String(), true, true}
	return nil
}

// jbool is a boolean member; set says the member was there at all.
type jbool struct {
	b, ok, set bool
}

func (v *jbool) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	*v = jbool{set: true}
	switch d.PeekKind() {
	case 't':
		v.b, v.ok = true, true
	case 'f':
		v.ok = true
	}
	return d.SkipValue()
}

// jnum is a number member; ok is false for other kinds and for numbers out
// of float64 range (encoding/json cannot decode those into any either).
type jnum struct {
	f  float64
	ok bool
}

func (v *jnum) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	*v = jnum{}
	if d.PeekKind() != '0' {
		return d.SkipValue()
	}
	raw, err := d.ReadValue()
	if err != nil {
		return err
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	*v = jnum{f, err == nil}
	return nil
}

// int is the number when it is integral and in int64 range. Integers go
// through float64 so that a value and its re-encoding by encoding/json (a
// float64 in an any) decode alike.
func (v jnum) int() int64 {
	if !v.ok || v.f != math.Trunc(v.f) || v.f < -9.2e18 || v.f > 9.2e18 {
		return 0
	}
	return int64(v.f)
}

// jraw keeps a member's JSON as it is.
type jraw []byte

func (v *jraw) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	raw, err := d.ReadValue()
	if err != nil {
		return err
	}
	*v = append(jraw(nil), raw...)
	return nil
}

// jobj is an object member decoded into T; ok is false when it is absent
// or not an object. A duplicate member replaces the earlier one.
type jobj[T any] struct {
	v  T
	ok bool
}

func (o *jobj[T]) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	*o = jobj[T]{}
	if d.PeekKind() != '{' {
		return d.SkipValue()
	}
	if err := json.UnmarshalDecode(d, &o.v); err != nil {
		return err
	}
	o.ok = true
	return nil
}

// jlist is an array member; it is nil when absent or not an array.
type jlist[T any] []T

func (l *jlist[T]) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	*l = nil
	if d.PeekKind() != '[' {
		return d.SkipValue()
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	out := jlist[T]{}
	for d.PeekKind() != ']' {
		var e T
		if err := json.UnmarshalDecode(d, &e); err != nil {
			return err
		}
		out = append(out, e)
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	*l = out
	return nil
}

// wireContent is message.content: a list of blocks, or a plain string (one
// text block). Anything else yields no blocks.
type wireContent []ContentBlock

func (c *wireContent) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	*c = nil
	switch d.PeekKind() {
	case '"':
		var s jstr
		if err := s.UnmarshalJSONFrom(d); err != nil {
			return err
		}
		*c = wireContent{{Type: "text", Text: s.s}}
		return nil
	case '[':
	default:
		return d.SkipValue()
	}
	var blocks jlist[jobj[wireBlock]]
	if err := blocks.UnmarshalJSONFrom(d); err != nil {
		return err
	}
	for _, b := range blocks {
		if b.ok {
			*c = append(*c, b.v.block())
		}
	}
	return nil
}

func (b *wireBlock) block() ContentBlock {
	cb := ContentBlock{
		Type:      b.Type.s,
		Text:      b.Text.s,
		ToolUseID: b.ToolUseID.s,
		ToolName:  b.Name.s,
		IsError:   b.IsError.b,
	}
	if !b.Text.ok {
		cb.Text = b.Thinking.s
	}
	if cb.ToolUseID == "" {
		cb.ToolUseID = b.ID.s
	}
	if b.Input != nil {
		cb.Input = []byte(b.Input)
	}
	if b.Content != nil {
		cb.Content = []byte(b.Content)
	}
	return cb
}

func (u *wireUsage) usage() Usage {
	return Usage{
		InputTokens:              u.InputTokens.int(),
		OutputTokens:             u.OutputTokens.int(),
		CacheCreationInputTokens: u.CacheCreationInputTokens.int(),
		CacheReadInputTokens:     u.CacheReadInputTokens.int(),
	}
}

// strs keeps the values that are strings.
func strs(l jlist[jstr]) []string {
	var out []string
	for _, s := range l {
		if s.ok {
			out = append(out, s.s)
		}
	}
	return out
}

// decodeUsage decodes a usage object; anything else is zero usage.
func decodeUsage(raw []byte) Usage {
	var u jobj[wireUsage]
	if json.Unmarshal(raw, &u, decodeOptions) != nil {
		return Usage{}
	}
	return u.v.usage()
}
