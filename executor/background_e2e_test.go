//go:build unix

package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
)

// TestE2EBackgroundTaskOutlivesTheResult: the model starts a Bash command in
// the background and ends its turn; the CLI reports the task in flight, so
// its input stays open and the result grace (1 s here) does not stop it
// while the task runs (4 s). The task finishes, the CLI takes its
// notification as a turn of its own, and the outcome is that last result.
func TestE2EBackgroundTaskOutlivesTheResult(t *testing.T) {
	x := newE2E(t,
		fakeapi.Rule{When: "start it", Reply: fakeapi.Reply{Text: "Starting.", ToolUse: &fakeapi.ToolUse{
			Name: "Bash", Input: map[string]any{"command": "timeout 4 tail -f /dev/null; echo bg > bg.txt", "description": "background work", "run_in_background": true}}}, Times: 1},
		fakeapi.Rule{When: "Command running in background", Reply: fakeapi.Reply{Text: "Started; waiting for it."}, Times: 1},
		fakeapi.Rule{Reply: fakeapi.Reply{Text: "The background work is done."}},
	)
	e := x.executor(func(c *Config) { c.ControlProtocol = true; c.ResultGrace = time.Second })
	_, o := x.run(e, Request{Prompt: "start it", CanUseTool: func(ctx context.Context, c *ControlRequest) Permission { return Permission{Allow: true} }})
	if o.Status != StatusSuccess || o.Signal != "" {
		t.Fatalf("outcome %s %s %q, signal %q", o.Status, o.Category, o.Error, o.Signal)
	}
	for _, w := range o.Warnings {
		if strings.Contains(w, "after its result line") {
			t.Errorf("the CLI was stopped while its background task ran: %s", w)
		}
	}
	if b, err := os.ReadFile(filepath.Join(x.wd, "bg.txt")); err != nil || strings.TrimSpace(string(b)) != "bg" {
		t.Errorf("the background task did not finish: %q, %v", b, err)
	}
	if o.FinalText != "The background work is done." {
		t.Errorf("final text %q, want the turn after the task's notification", o.FinalText)
	}
}
