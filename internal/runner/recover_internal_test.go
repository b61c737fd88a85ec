package runner

import (
	"strings"
	"testing"
)

// TestLastReply: the model's reply after the session's last prompt, as the
// CLI's session file (JSONL, measured with 2.1.330) has it, when it is over.
func TestLastReply(t *testing.T) {
	const (
		prompt    = `{"type":"user","isSidechain":false,"message":{"role":"user","content":"Implement spec X"}}`
		answer    = `{"type":"user","isSidechain":false,"message":{"role":"user","content":[{"type":"text","text":"[answers to question set s1]\nBEGIN ANSWERS"}]}}`
		meta      = `{"type":"user","isMeta":true,"message":{"role":"user","content":"<system-reminder>x</system-reminder>"}}`
		blob      = `{"type":"api-request-blob","message":{"role":"user","content":[{"type":"text","text":"reminder"}]}}`
		asks      = `{"type":"assistant","isSidechain":false,"message":{"role":"assistant","content":[{"type":"text","text":"I need a decision.\n<!--QUESTION:{}-->"}]}}`
		calls     = `{"type":"assistant","isSidechain":false,"message":{"role":"assistant","content":[{"type":"text","text":"Running it."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}]}}`
		result    = `{"type":"user","isSidechain":false,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}}`
		sub       = `{"type":"assistant","isSidechain":true,"message":{"role":"assistant","content":[{"type":"text","text":"a sub-agent's text"}]}}`
		subPrompt = `{"type":"user","isSidechain":true,"message":{"role":"user","content":"sub-agent task"}}`
	)
	for _, tc := range []struct {
		name   string
		lines  []string
		needle string
		want   string // texts joined with |; "" with ok false
	}{
		{"a question after the prompt", []string{prompt, meta, blob, asks}, "Implement spec X", "I need a decision.\n<!--QUESTION:{}-->"},
		{"any prompt", []string{prompt, asks}, "", "I need a decision.\n<!--QUESTION:{}-->"},
		{"the prompt is another turn's", []string{prompt, asks}, "s1", ""},
		{"only the prompt", []string{prompt, meta}, "Implement spec X", ""},
		{"a tool call without its result", []string{answer, calls}, "s1", ""},
		{"a tool call with its result, then text", []string{answer, calls, result, asks}, "s1", "Running it.|I need a decision.\n<!--QUESTION:{}-->"},
		{"a sub-agent's lines are not the reply", []string{prompt, subPrompt, sub}, "Implement spec X", ""},
		{"a later prompt starts over", []string{prompt, asks, answer}, "", ""},
		{"damaged lines are skipped", []string{prompt, `{"type":`, asks}, "Implement", "I need a decision.\n<!--QUESTION:{}-->"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			texts, ok := lastReply([]byte(strings.Join(tc.lines, "\n")+"\n"), tc.needle)
			got := ""
			if ok {
				got = strings.Join(texts, "|")
			}
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("lastReply = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}
