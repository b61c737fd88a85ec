//go:build unix

package executor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
)

// TestE2EControlProtocol drives the real CLI in the control protocol: a Bash
// call that is not pre-allowed arrives as a can_use_tool request; allowed, it
// runs; denied, it does not and the model is told the reason; an
// AskUserQuestion answered with updatedInput.answers reaches the model as
// the tool's answer.
func TestE2EControlProtocol(t *testing.T) {
	ask := map[string]any{"questions": []any{map[string]any{
		"question": "Which auth method?", "header": "Auth", "multiSelect": false,
		"options": []any{map[string]any{"label": "OAuth2", "description": "o"}, map[string]any{"label": "JWT", "description": "j"}},
	}}}
	x := newE2E(t,
		fakeapi.Rule{When: "make the file", Reply: fakeapi.Reply{Text: "Making it.", ToolUse: &fakeapi.ToolUse{
			Name: "Bash", Input: map[string]any{"command": "touch made_by_tool.txt", "description": "Create a marker file"}}}},
		fakeapi.Rule{When: "ask me", Reply: fakeapi.Reply{ToolUse: &fakeapi.ToolUse{Name: "AskUserQuestion", Input: ask}}},
		fakeapi.Rule{Respond: func(r fakeapi.Request) fakeapi.Reply {
			return fakeapi.Reply{Text: "SAW " + strings.Join(r.ToolResults, " | ")}
		}},
	)
	e := x.executor(func(c *Config) { c.ControlProtocol = true })
	marker := filepath.Join(x.wd, "made_by_tool.txt")

	for _, allow := range []bool{false, true} {
		var got []*ControlRequest
		_, o := x.run(e, Request{Prompt: "make the file", CanUseTool: func(ctx context.Context, c *ControlRequest) Permission {
			got = append(got, c)
			if allow {
				return Permission{Allow: true}
			}
			return Permission{Message: "not on a Friday"}
		}})
		if o.Status != StatusSuccess || len(got) != 1 || got[0].ToolName != "Bash" || got[0].Description != "Create a marker file" {
			t.Fatalf("allow=%v: outcome %s %s %q; requests %+v", allow, o.Status, o.Category, o.Error, got)
		}
		_, err := os.Stat(marker)
		if ran := err == nil; ran != allow {
			t.Errorf("allow=%v: the command ran: %v", allow, ran)
		}
		if !allow && !strings.Contains(o.FinalText, "not on a Friday") {
			t.Errorf("the model was not told the reason: %q", o.FinalText)
		}
	}

	_, o := x.run(e, Request{Prompt: "ask me", CanUseTool: func(ctx context.Context, c *ControlRequest) Permission {
		var in map[string]any
		_ = json.Unmarshal(c.Input, &in)
		in["answers"] = map[string]string{"Which auth method?": "JWT"}
		b, _ := json.Marshal(in)
		return Permission{Allow: true, UpdatedInput: b}
	}})
	if o.Status != StatusSuccess || !strings.Contains(o.FinalText, `"Which auth method?"="JWT"`) {
		t.Errorf("AskUserQuestion: %s %q", o.Status, o.FinalText)
	}
}
