package runner

import (
	"encoding/json"
	"sort"

	"github.com/orchestrator-dev/orchestrator/executor"
)

// ToolCall is one of the model's tool calls in a turn.
type ToolCall struct {
	ID      string // tool_use_id; empty for a refusal that named none
	Name    string // as the CLI wrote it: untrusted
	Summary string // Summarize of its input: untrusted
	Refused bool   // the CLI refused it
}

// ToolCalls collects the model's tool calls from a turn's CLI events (not a
// sub-agent's), and which of them the CLI refused: a system
// permission_denied line, or the result's permission_denials, names the call
// by its id (docs/claude-cli.md). The terminal's summary, show and the
// progress surfaces all list refused calls from it.
type ToolCalls struct {
	// Summarize gives the one-line view of a call's input that is kept
	// (not the input itself: a Write call's input may be a whole file).
	Summarize func(json.RawMessage) string

	calls   []ToolCall
	refused map[string]string // tool_use_id → tool name
}

// Observe takes the turn's next event.
func (c *ToolCalls) Observe(ev executor.Event) {
	switch ev := ev.(type) {
	case *executor.AssistantMessage:
		if ev.ParentToolUseID != "" {
			return // a sub-agent's call
		}
		for _, b := range ev.ToolUses() {
			call := ToolCall{ID: b.ToolUseID, Name: b.ToolName}
			if c.Summarize != nil {
				call.Summary = c.Summarize(b.Input)
			}
			c.calls = append(c.calls, call)
		}
	case *executor.SystemOther:
		if ev.Subtype != "permission_denied" {
			return
		}
		var line struct {
			ToolUseID string `json:"tool_use_id"`
		}
		if json.Unmarshal(ev.Raw(), &line) == nil {
			c.refuse(line.ToolUseID, ev.ToolName)
		}
	case *executor.Result:
		var line struct {
			Denials []struct {
				ToolName  string `json:"tool_name"`
				ToolUseID string `json:"tool_use_id"`
			} `json:"permission_denials"`
		}
		if json.Unmarshal(ev.Raw(), &line) == nil {
			for _, d := range line.Denials {
				c.refuse(d.ToolUseID, d.ToolName)
			}
		}
	}
}

func (c *ToolCalls) refuse(id, name string) {
	if c.refused == nil {
		c.refused = map[string]string{}
	}
	if id == "" {
		id = "?" + name // no id: still listed, once per tool
	}
	c.refused[id] = name
}

// List returns the calls in order, refused ones marked; a refusal whose
// call was not seen is listed after them.
func (c *ToolCalls) List() []ToolCall {
	out := []ToolCall{}
	seen := map[string]bool{}
	for _, call := range c.calls {
		if _, ok := c.refused[call.ID]; ok && call.ID != "" {
			call.Refused = true
			seen[call.ID] = true
		}
		out = append(out, call)
	}
	ids := make([]string, 0, len(c.refused))
	for id := range c.refused {
		if !seen[id] {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		out = append(out, ToolCall{Name: c.refused[id], Refused: true})
	}
	return out
}

// Refused returns the refused calls, in the order of List.
func (c *ToolCalls) Refused() []ToolCall {
	var out []ToolCall
	for _, call := range c.List() {
		if call.Refused {
			out = append(out, call)
		}
	}
	return out
}
