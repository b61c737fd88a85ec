package github

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// TestApprovalCommentShowsTheCommandAndHowToAnswer: an approval is asked as
// a comment of its own kind: the tool in the heading, the command in a code
// block, the three options and how to allow or refuse with a reason; a
// reply "Deny: reason" refuses with that reason, and `/answer QID option`
// names the approval.
func TestApprovalCommentShowsTheCommandAndHowToAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	call := func(id, cmd string) questions.ToolCall {
		in, _ := json.Marshal(map[string]string{"command": cmd, "description": "Drop the build folder"})
		return questions.ToolCall{ToolUseID: id, Tool: "Bash", Input: in}
	}
	deny := questions.ApprovalSet("run-approval", 1, call("toolu_1", "rm -rf build"))
	ch := startAsk(ctxTimeout(t), s, deny)
	q := f.waitAsked(t, deny)
	for _, want := range []string{
		"### 🔐 Approval needed: the agent wants to use `Bash`",
		"```sh\nrm -rf build\n```",
		"Description: Drop the build folder",
		"1. **Allow once**", "2. **Allow for this run**", "3. **Deny**",
		"reply `Allow once`, `Allow for this run` or `Deny`",
		"reply `Deny: the reason`",
		"`/answer " + deny.Questions[0].ID + " Allow once`",
	} {
		if !strings.Contains(q.Body, want) {
			t.Errorf("the approval comment lacks %q:\n%s", want, q.Body)
		}
	}
	f.srv.AddComment(testRepo, 1, "alice", "Deny: we keep the build folder")
	r := waitResult(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	v, err := questions.ApprovalVerdict(deny, r.resp)
	if err != nil || v.Allow || v.Reason != "we keep the build folder" {
		t.Errorf("verdict = %+v, %v; want a refusal with its reason", v, err)
	}

	allow := questions.ApprovalSet("run-approval", 1, call("toolu_2", "make test"))
	ch = startAsk(ctxTimeout(t), s, allow)
	f.waitAsked(t, allow)
	f.srv.AddComment(testRepo, 1, "alice", "/answer "+allow.Questions[0].ID+" Allow for this run")
	r = waitResult(t, ch)
	if r.err != nil || !slices.Equal(r.resp.Answers[0].Labels, []string{questions.AllowForRun}) {
		t.Fatalf("Ask = %+v, %v; want Allow for this run", r.resp, r.err)
	}
}

// TestApprovalCommentShowsHiddenFirstLine: a command whose dangerous first
// line is followed by 4 KiB of comments is shown whole, first line
// included (issue 21).
func TestApprovalCommentShowsHiddenFirstLine(t *testing.T) {
	t.Parallel()
	body := strings.Join(renderParts(surfacetest.HiddenApproval()), "\n")
	for _, want := range []string{"```sh\n" + surfacetest.HiddenFirstLine + "\n", "echo done\n```"} {
		if !strings.Contains(body, want) {
			t.Errorf("the comment does not show %q:\n%s", want, body)
		}
	}
	// "Allow for this run" says what it allows: this very call.
	if !strings.Contains(body, "this very call") {
		t.Errorf("the comment does not say what \"Allow for this run\" allows:\n%s", body)
	}
}
