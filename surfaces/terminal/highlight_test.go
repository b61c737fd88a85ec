package terminal

import (
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestApprovalCommandHighlighted: with Pretty, an approval's command is
// bold; its model text is cleaned as always.
func TestApprovalCommandHighlighted(t *testing.T) {
	set := questions.ApprovalSet("r1", 1, questions.ToolCall{ToolUseID: "t1", Tool: "Bash", Input: []byte(`{"command":"rm -rf build\u001b[2J"}`)})
	s := &Surface{opts: Options{Pretty: true}}
	out := s.renderSet(set)
	if !strings.Contains(out, "\x1b[1mrm -rf build") || strings.Contains(out, "\x1b[2J") {
		t.Errorf("rendered %q", out)
	}
}
