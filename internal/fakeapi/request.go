package fakeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Request is one call of POST /v1/messages as the server received it.
type Request struct {
	// Time is when the request arrived; Ended, when its answer was over
	// (its stream ended, or the client went away), zero until then.
	Time  time.Time `json:"time"`
	Ended time.Time `json:"ended,omitzero"`
	// Model is the request's "model".
	Model string `json:"model"`
	// System is all text of the request's "system" prompt, its blocks joined
	// with a newline.
	System string `json:"system,omitempty"`
	// Messages are the request's "messages", in order, including the
	// role "system" entries the CLI sends.
	Messages []Message `json:"messages"`
	// LastUserText is the text of the last role "user" message: its text
	// blocks and the contents of its tool_result blocks, joined with a
	// newline. Text blocks that are nothing but a <system-reminder> (which
	// the CLI puts before the prompt) are left out. Rules match against it.
	LastUserText string `json:"last_user_text"`
	// ToolResults are the contents of the tool_result blocks of the last
	// role "user" message, in order.
	ToolResults []string `json:"tool_results,omitempty"`
	// Body is the raw request body.
	Body []byte `json:"-"`
}

// Message is one entry of a request's "messages".
type Message struct {
	Role string `json:"role"`
	// Content holds the message's blocks. A message whose content is a plain
	// string has one text block.
	Content []Block `json:"content"`
}

// Text returns the text of m's text blocks, joined with a newline.
func (m Message) Text() string {
	var parts []string
	for _, b := range m.Content {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Block is one content block of a message. Only the fields of its Type are set.
type Block struct {
	// Type is "text", "tool_use", "tool_result", or whatever else the client sent.
	Type string `json:"type"`
	// Text is a text block's text.
	Text string `json:"text,omitempty"`
	// ID, Name and Input describe a tool_use block.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError describe a tool_result block. Content
	// is the result's text: a string content as is, a list of blocks as
	// their texts joined with a newline.
	ToolUseID string `json:"tool_use_id,omitempty"`
	Content   string `json:"content,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
}

// wireRequest is the part of a Messages API request body the server reads.
type wireRequest struct {
	Model    string          `json:"model"`
	System   json.RawMessage `json:"system"`
	Messages []wireMessage   `json:"messages"`
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// parseRequest decodes a Messages API request body. The result's Time is unset.
func parseRequest(body []byte) (Request, error) {
	req := Request{Body: body}
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return req, fmt.Errorf("decode request body: %w", err)
	}
	req.Model = w.Model
	system, err := blocksOf(w.System)
	if err != nil {
		return req, fmt.Errorf("decode system: %w", err)
	}
	var sys []string
	for _, b := range system {
		if b.Type == "text" {
			sys = append(sys, b.Text)
		}
	}
	req.System = strings.Join(sys, "\n")

	req.Messages = make([]Message, 0, len(w.Messages))
	for i, wm := range w.Messages {
		content, err := blocksOf(wm.Content)
		if err != nil {
			return req, fmt.Errorf("decode messages[%d].content: %w", i, err)
		}
		req.Messages = append(req.Messages, Message{Role: wm.Role, Content: content})
	}
	req.LastUserText, req.ToolResults = lastUser(req.Messages)
	return req, nil
}

// lastUser returns the scriptable text and the tool results of the last
// role "user" message of msgs.
func lastUser(msgs []Message) (text string, toolResults []string) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		var parts []string
		for _, b := range msgs[i].Content {
			switch b.Type {
			case "text":
				if !isSystemReminder(b.Text) {
					parts = append(parts, b.Text)
				}
			case "tool_result":
				parts = append(parts, b.Content)
				toolResults = append(toolResults, b.Content)
			}
		}
		return strings.Join(parts, "\n"), toolResults
	}
	return "", nil
}

// isSystemReminder reports whether s is nothing but a <system-reminder> section.
func isSystemReminder(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "<system-reminder>") &&
		strings.HasSuffix(s, "</system-reminder>") &&
		strings.Count(s, "<system-reminder>") == 1
}

// blocksOf decodes a content value: absent or null (no blocks), a string
// (one text block) or a list of blocks.
func blocksOf(raw json.RawMessage) ([]Block, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []Block{{Type: "text", Text: s}}, nil
	}
	var wbs []wireBlock
	if err := json.Unmarshal(raw, &wbs); err != nil {
		return nil, err
	}
	blocks := make([]Block, 0, len(wbs))
	for i, wb := range wbs {
		b := Block{Type: wb.Type, Text: wb.Text, ID: wb.ID, Name: wb.Name, Input: wb.Input, ToolUseID: wb.ToolUseID, IsError: wb.IsError}
		if wb.Type == "tool_result" {
			inner, err := blocksOf(wb.Content)
			if err != nil {
				return nil, fmt.Errorf("block %d: tool_result content: %w", i, err)
			}
			var texts []string
			for _, ib := range inner {
				if ib.Type == "text" {
					texts = append(texts, ib.Text)
				}
			}
			b.Content = strings.Join(texts, "\n")
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}
