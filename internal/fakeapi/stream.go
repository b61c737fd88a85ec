package fakeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Token counts reported in every reply's usage: fixed, so that runs are
// reproducible.
const (
	inputTokens  = 100
	outputTokens = 20
)

// stream writes reply to w as the Messages API's Server-Sent Events. It
// returns early with an error when ctx ends (the client went away, or the
// server closed) or a write fails.
func stream(ctx context.Context, w http.ResponseWriter, model string, reply Reply) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Request-Id", newID("req_fake_"))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	sw := &sseWriter{w: w, rc: rc}

	sw.event("message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id":            newID("msg_fake_"),
			"type":          "message",
			"role":          "assistant",
			"model":         model,
			"content":       []any{},
			"stop_reason":   nil,
			"stop_sequence": nil,
			"usage": map[string]any{
				"input_tokens":                inputTokens,
				"output_tokens":               1,
				"cache_creation_input_tokens": 0,
				"cache_read_input_tokens":     0,
			},
		},
	})
	sw.event("ping", map[string]any{"type": "ping"})
	if err := sw.flush(); err != nil {
		return err
	}

	index := 0
	if reply.Text != "" || reply.ToolUse == nil {
		sw.event("content_block_start", map[string]any{
			"type":          "content_block_start",
			"index":         index,
			"content_block": map[string]any{"type": "text", "text": ""},
		})
		for _, piece := range split(reply.Text, reply.Chunks) {
			if err := pause(ctx, reply.ChunkDelay); err != nil {
				return err
			}
			sw.event("content_block_delta", map[string]any{
				"type":  "content_block_delta",
				"index": index,
				"delta": map[string]any{"type": "text_delta", "text": piece},
			})
			if err := sw.flush(); err != nil {
				return err
			}
		}
		sw.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}

	stopReason := "end_turn"
	var calls []ToolUse
	if reply.ToolUse != nil {
		calls = append(append(calls, *reply.ToolUse), reply.MoreToolUses...)
	}
	for _, tu := range calls {
		stopReason = "tool_use"
		id := tu.ID
		if id == "" {
			id = newID("toolu_fake_")
		}
		input := tu.Input
		if input == nil {
			input = map[string]any{}
		}
		js, err := json.Marshal(input)
		if err != nil {
			return fmt.Errorf("encode tool input of %s: %w", tu.Name, err)
		}
		sw.event("content_block_start", map[string]any{
			"type":          "content_block_start",
			"index":         index,
			"content_block": map[string]any{"type": "tool_use", "id": id, "name": tu.Name, "input": map[string]any{}},
		})
		// Two pieces, as the real API streams partial JSON.
		for _, part := range split(string(js), 2) {
			sw.event("content_block_delta", map[string]any{
				"type":  "content_block_delta",
				"index": index,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": part},
			})
		}
		sw.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}

	sw.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stopReason, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": outputTokens},
	})
	sw.event("message_stop", map[string]any{"type": "message_stop"})
	return sw.flush()
}

// sseWriter writes Server-Sent Events and keeps the first error.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer
	err error
}

// event writes one event. Its data is one line: JSON never holds a raw newline.
func (sw *sseWriter) event(name string, data any) {
	if sw.err != nil {
		return
	}
	js, err := json.Marshal(data)
	if err != nil {
		sw.err = fmt.Errorf("encode %s event: %w", name, err)
		return
	}
	sw.buf.Reset()
	sw.buf.WriteString("event: ")
	sw.buf.WriteString(name)
	sw.buf.WriteString("\ndata: ")
	sw.buf.Write(js)
	sw.buf.WriteString("\n\n")
	if _, err := sw.w.Write(sw.buf.Bytes()); err != nil {
		sw.err = fmt.Errorf("write %s event: %w", name, err)
	}
}

// flush sends what was written so far to the client.
func (sw *sseWriter) flush() error {
	if sw.err != nil {
		return sw.err
	}
	if err := sw.rc.Flush(); err != nil {
		sw.err = fmt.Errorf("flush events: %w", err)
	}
	return sw.err
}

// pause waits d, or returns ctx's error when ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// split cuts s into n pieces of about equal length, never inside a UTF-8
// character, so that the pieces joined are s again. It returns at least one
// piece (possibly empty) and at most one per character.
func split(s string, n int) []string {
	starts := make([]int, 0, len(s))
	for i := range s { // i steps over the start of each character
		starts = append(starts, i)
	}
	if n > len(starts) {
		n = len(starts)
	}
	if n <= 1 {
		return []string{s}
	}
	pieces := make([]string, 0, n)
	lo := 0
	for i := 1; i < n; i++ {
		hi := starts[i*len(starts)/n]
		pieces = append(pieces, s[lo:hi])
		lo = hi
	}
	return append(pieces, s[lo:])
}
