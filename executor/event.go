package executor

import "encoding/json"

// Event is one line of the agent CLI's stream-json output, typed. The set of
// event types is closed: *SystemInit, *SystemOther, *UserMessage,
// *AssistantMessage, *Result, *StreamEvent, *ControlRequest, *ControlCancel
// and *Unknown.
//
// Every event keeps the exact JSON it was parsed from (Raw); the raw JSON
// fields inside an event (ContentBlock.Input, ContentBlock.Content, …) are
// exact copies of their part of it.
type Event interface {
	// SessionID is the session the line belongs to. It is never empty for
	// the known types but the control lines (which carry none); for
	// *Unknown it may be.
	SessionID() string
	// Raw is the line's JSON, without the line ending.
	Raw() json.RawMessage
	isEvent()
}

type base struct {
	sessionID string
	raw       json.RawMessage
}

func (b *base) SessionID() string              { return b.sessionID }
func (b *base) Raw() json.RawMessage           { return b.raw }
func (b *base) isEvent()                       {}
func (b *base) setBase(sid string, raw []byte) { b.sessionID, b.raw = sid, raw }

// MCPServer is one MCP server as the init line reports it; Status is
// "connected", "failed", "pending", … as the CLI says.
type MCPServer struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// SystemInit is the `system`/`init` line that opens every turn.
type SystemInit struct {
	base
	Model          string
	CWD            string
	PermissionMode string
	// APIKeySource is a label such as "ANTHROPIC_API_KEY" or "none" (never
	// the key); empty when absent or not a string.
	APIKeySource string
	CLIVersion   string // claude_code_version
	Tools        []string
	MCPServers   []MCPServer
}

// SystemOther is any other `system` line: api_retry, status,
// permission_denied, hook output, compaction notices, …
type SystemOther struct {
	base
	Subtype string
	// ToolName is set for permission_denied lines.
	ToolName string
}

// ContentBlock is one block of a message's content. Type is "text",
// "tool_use", "tool_result", "thinking", … Unknown block types are kept with
// their Type only (the full block is in the event's Raw).
type ContentBlock struct {
	Type string
	// Text of a "text" block (or of "thinking").
	Text string
	// ToolUseID is a tool_use block's "id" or a tool_result block's
	// "tool_use_id".
	ToolUseID string
	// ToolName and Input belong to tool_use blocks.
	ToolName string
	Input    json.RawMessage
	// IsError and Content belong to tool_result blocks; Content is the raw
	// JSON (a string or a list of blocks).
	IsError bool
	Content json.RawMessage
}

// AssistantMessage is an `assistant` line: one message of the model, or a
// synthetic one (Model "<synthetic>") carrying an API error.
type AssistantMessage struct {
	base
	MessageID  string
	Model      string
	Content    []ContentBlock
	StopReason string // often empty: the CLI sends null here and puts it on the result
	// ParentToolUseID is set when the message comes from a sub-agent.
	ParentToolUseID string
	// IsAPIErrorMessage, APIErrorStatus and Error describe synthetic API
	// error messages ("rate_limit", 429, …).
	IsAPIErrorMessage bool
	APIErrorStatus    int
	Error             string
}

// Texts returns the text of the text blocks, in order.
func (m *AssistantMessage) Texts() []string { return texts(m.Content) }

// ToolUses returns the tool_use blocks, in order.
func (m *AssistantMessage) ToolUses() []ContentBlock { return blocksOf(m.Content, "tool_use") }

// UserMessage is a `user` line: tool results going back to the model, or a
// user turn echoed in stream-json input mode.
type UserMessage struct {
	base
	Content         []ContentBlock
	ParentToolUseID string
}

// ToolResults returns the tool_result blocks, in order.
func (m *UserMessage) ToolResults() []ContentBlock { return blocksOf(m.Content, "tool_result") }

// Texts returns the text of the text blocks, in order.
func (m *UserMessage) Texts() []string { return texts(m.Content) }

// Usage is the token usage of a run.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// Result is the `result` line that ends a turn (or the claw harness's
// envelope, mapped to the same shape).
type Result struct {
	base
	// Subtype is "success", "error", "error_max_turns",
	// "error_during_execution", … The real CLI sends "success" together
	// with is_error true on API errors: IsError is what decides.
	Subtype string
	// IsError is true only when the line has `"is_error": true` (a JSON
	// boolean); IsErrorSet says whether is_error was a boolean at all.
	IsError    bool
	IsErrorSet bool
	// Text is the `result` field: the final text, or the error text.
	Text    string
	HasText bool
	// Errors is the `errors` list (error_during_execution, error_max_turns).
	Errors   []string
	NumTurns int
	// TotalCostUSD is the session's cost so far: on a resumed session the
	// CLI counts the earlier calls too (measured on 2.1.330).
	TotalCostUSD float64
	// CostUSD is what this call of the CLI cost: the sum of the costUSD of
	// model_usage_since_last_result, or TotalCostUSD when the line has none
	// (older CLIs, claw).
	CostUSD        float64
	Usage          Usage
	DurationMS     int64
	StopReason     string
	TerminalReason string // "completed", "api_error", "max_turns", …
	APIErrorStatus int    // HTTP status of an API error, 0 when none
	// PermissionDenials names the tools denied during the turn.
	PermissionDenials []string
	// Kind and Hint come from a claw error envelope (docs/claude-cli.md).
	Kind string
	Hint string
	// DeferredToolUse is the tool call a PreToolUse hook deferred
	// (terminal_reason "tool_deferred" or "tool_deferred_unavailable"); nil
	// when the line has none.
	DeferredToolUse *DeferredToolUse
}

// DeferredToolUse is the tool call a turn ended on when a PreToolUse hook
// answered permissionDecision "defer": the tool did not run, and resuming the
// session fires the hook again for this call (docs/claude-cli.md).
type DeferredToolUse struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty"`
}

// StreamEvent is a `stream_event` line (with --include-partial-messages):
// one raw server-sent event of the Messages API.
type StreamEvent struct {
	base
	EventType string // message_start, content_block_delta, …
	Index     int
	DeltaType string // text_delta, input_json_delta, … for deltas
	TextDelta string
	// Event is the inner event's JSON.
	Event           json.RawMessage
	ParentToolUseID string
}

// ControlRequest is a `control_request` line: in the control protocol
// (Config.ControlProtocol) the CLI asks the caller something and waits for a
// control_response on stdin. Subtype "can_use_tool" is a permission request
// (AskUserQuestion included); the executor answers any other subtype with an
// error response itself. Control lines carry no session_id.
type ControlRequest struct {
	base
	RequestID string
	Subtype   string
	// The can_use_tool fields.
	ToolName    string
	DisplayName string
	Input       json.RawMessage
	ToolUseID   string
	// Description is the CLI's own description of the call (for Bash, the
	// model's description of the command). Untrusted model text.
	Description string
	// PermissionSuggestions is the CLI's list of rules that would allow
	// such calls (raw JSON, e.g. [{"type":"addRules","rules":[…],…}]).
	PermissionSuggestions   json.RawMessage
	BlockedPath             string
	RequiresUserInteraction bool
}

// ControlCancel is a `control_cancel_request` line: the CLI no longer wants
// an answer to RequestID.
type ControlCancel struct {
	base
	RequestID string
}

// Unknown is a line whose type is a string this package does not know (a
// future type, …). It is not an error.
type Unknown struct {
	base
	Type string
}

func texts(blocks []ContentBlock) []string {
	var out []string
	for _, b := range blocks {
		if b.Type == "text" {
			out = append(out, b.Text)
		}
	}
	return out
}

func blocksOf(blocks []ContentBlock, typ string) []ContentBlock {
	var out []ContentBlock
	for _, b := range blocks {
		if b.Type == typ {
			out = append(out, b)
		}
	}
	return out
}
