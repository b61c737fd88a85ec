package terminal

import (
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestRenderLaterEphemeral: a terminal whose store goes with the command
// (rehearse) suggests no command to answer later; one whose store stays
// does.
func TestRenderLaterEphemeral(t *testing.T) {
	t.Parallel()
	set := questions.Set{ID: "s1", RunID: "r1", Questions: []questions.Question{{ID: "q1", Text: "Which?"}}}
	kept := New(strings.NewReader(""), &strings.Builder{}, Options{}).renderLater(set)
	if !strings.Contains(kept, "orchestrator answer q1") || !strings.Contains(kept, "orchestrator resume r1") {
		t.Errorf("renderLater = %q, want the commands", kept)
	}
	gone := New(strings.NewReader(""), &strings.Builder{}, Options{Ephemeral: true}).renderLater(set)
	if strings.Contains(gone, "orchestrator") || !strings.Contains(gone, "rehearse again") {
		t.Errorf("renderLater (ephemeral) = %q, want no command and to rehearse again", gone)
	}
}
