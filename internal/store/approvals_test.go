package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
)

func newRunningRun(t *testing.T, s *Store, runID string) {
	t.Helper()
	if _, err := s.CreateRun(context.Background(), Run{ID: runID, Prompt: "do it", Surfaces: []string{"terminal"}, Status: RunRunning}); err != nil {
		t.Fatal(err)
	}
}

func bashCall(id, cmd string) questions.ToolCall {
	in, _ := json.Marshal(map[string]string{"command": cmd})
	return questions.ToolCall{ToolUseID: id, Tool: "Bash", Input: in}
}

func askApproval(t *testing.T, s *Store, runID string, call questions.ToolCall, live bool) questions.Set {
	t.Helper()
	set := questions.ApprovalSet(runID, 1, call)
	c, created, err := s.AskTool(context.Background(), ToolCall{ToolUseID: call.ToolUseID, RunID: runID, Kind: questions.KindApproval, Tool: call.Tool, Input: call.Input}, set, []string{"terminal"}, live)
	if err != nil || !created || c.SetID != set.ID {
		t.Fatalf("AskTool: %+v %v %v", c, created, err)
	}
	return set
}

func answer(t *testing.T, s *Store, set questions.Set, text string) {
	t.Helper()
	a, err := questions.ParseQuestionAnswer(set.Questions[0], text)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordAnswer(context.Background(), questions.Response{SetID: set.ID, Answers: []questions.Answer{a}, By: "alice", Surface: "cli"}); err != nil {
		t.Fatal(err)
	}
}

// TestToolDecisionExactlyOnce: the decision taken from an answered approval
// is handed out once; the set is then resumed; asking again about the same
// tool_use_id changes nothing.
func TestToolDecisionExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	newRunningRun(t, s, "r1")
	call := bashCall("toolu_1", "touch x")
	set := askApproval(t, s, "r1", call, true)
	if run, _ := s.Run(ctx, "r1"); run.Status != RunRunning {
		t.Errorf("a live ask left the run %s", run.Status)
	}
	kinds, err := s.SetKinds(ctx, "r1")
	if err != nil || kinds[set.ID] != questions.KindApproval {
		t.Errorf("kinds %v %v", kinds, err)
	}
	if _, take, err := s.TakeToolDecision(ctx, "toolu_1"); err != nil || take != TakeNone {
		t.Fatalf("before the answer: %v %v", take, err)
	}
	// Asked again (the hook after the run loop): the same call.
	if c, created, err := s.AskTool(ctx, ToolCall{ToolUseID: "toolu_1", RunID: "r1", Kind: questions.KindApproval, Tool: "Bash"}, set, nil, true); err != nil || created || c.SetID != set.ID {
		t.Fatalf("asked twice: %+v %v %v", c, created, err)
	}
	answer(t, s, set, "Allow once")
	var wg sync.WaitGroup
	takes := make(chan Take, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, take, err := s.TakeToolDecision(ctx, "toolu_1")
			if err != nil || c.Decision != DecisionAllow {
				t.Errorf("take: %+v %v", c, err)
			}
			takes <- take
		}()
	}
	wg.Wait()
	close(takes)
	first := 0
	for tk := range takes {
		if tk == TakeFirst {
			first++
		} else if tk != TakeAgain {
			t.Errorf("take %v", tk)
		}
	}
	if first != 1 {
		t.Errorf("the decision was handed out %d times", first)
	}
	rec, _ := s.QuestionSet(ctx, set.ID)
	if rec.State != SetResumed {
		t.Errorf("set %s", rec.State)
	}
}

func TestToolDecisionDenyReasonAndRunRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	newRunningRun(t, s, "r1")
	deny := askApproval(t, s, "r1", bashCall("toolu_d", "rm -rf build"), false)
	if run, _ := s.Run(ctx, "r1"); run.Status != RunWaiting {
		t.Errorf("a parked ask left the run %s", run.Status)
	}
	answer(t, s, deny, "other: not on a Friday")
	c, take, err := s.TakeToolDecision(ctx, "toolu_d")
	if err != nil || take != TakeFirst || c.Decision != DecisionDeny || c.Reason != "not on a Friday" || !strings.Contains(c.DecidedBy, "alice") {
		t.Errorf("deny: %+v %v %v", c, take, err)
	}
	forRun := askApproval(t, s, "r1", bashCall("toolu_r", "make deploy"), true)
	answer(t, s, forRun, "Allow for this run")
	if c, take, err := s.TakeToolDecision(ctx, "toolu_r"); err != nil || take != TakeFirst || c.Decision != DecisionAllow {
		t.Errorf("allow for run: %+v %v %v", c, take, err)
	}
	rules, err := s.RunRules(ctx, "r1")
	if err != nil || len(rules) != 1 || rules[0] != `exact:Bash {"command":"make deploy"}` {
		t.Errorf("rules %q %v", rules, err)
	}
}

func TestToolDecisionAskToolAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	newRunningRun(t, s, "r1")
	call := questions.ToolCall{ToolUseID: "toolu_q", Tool: "AskUserQuestion", Input: json.RawMessage(`{"questions":[{"question":"Which auth?","options":[{"label":"OAuth2"},{"label":"JWT"}]}]}`)}
	set, err := questions.AskToolSet("r1", 1, call)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AskTool(ctx, ToolCall{ToolUseID: "toolu_q", RunID: "r1", Kind: questions.KindAskTool, Tool: call.Tool, Input: call.Input}, set, nil, true); err != nil {
		t.Fatal(err)
	}
	answer(t, s, set, "JWT")
	c, take, err := s.TakeToolDecision(ctx, "toolu_q")
	if err != nil || take != TakeFirst || c.Decision != DecisionAllow || !strings.Contains(string(c.UpdatedInput), `"answers":{"Which auth?":"JWT"}`) {
		t.Errorf("%+v %v %v", c, take, err)
	}
}

func TestDecideToolByPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	newRunningRun(t, s, "r1")
	c, err := s.DecideTool(ctx, ToolCall{ToolUseID: "toolu_p", RunID: "r1", Kind: questions.KindApproval, Tool: "Bash", Decision: DecisionDeny, Reason: "policy", DecidedBy: "policy: Bash(rm:*)"})
	if err != nil || c.Decision != DecisionDeny {
		t.Fatalf("%+v %v", c, err)
	}
	if c, err := s.DecideTool(ctx, ToolCall{ToolUseID: "toolu_p", RunID: "r1", Kind: questions.KindApproval, Tool: "Bash", Decision: DecisionAllow}); err != nil || c.Decision != DecisionDeny {
		t.Errorf("the first decision did not win: %+v %v", c, err)
	}
	if _, err := s.DecideTool(ctx, ToolCall{ToolUseID: "x", RunID: "r1", Decision: "maybe"}); err == nil {
		t.Error("a decision that is neither allow nor deny was stored")
	}
	if _, err := s.ToolCall(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown call: %v", err)
	}
	calls, err := s.ToolCalls(ctx, "r1")
	if err != nil || len(calls) != 1 {
		t.Errorf("calls %+v %v", calls, err)
	}
}

// TestDropToolCall: a dropped call is refused with the reason, never handed
// out, and its question expires; a decided call is left as it is.
func TestDropToolCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	newRunningRun(t, s, "r1")
	set := askApproval(t, s, "r1", bashCall("toolu_x", "touch x"), false)
	if err := s.DropToolCall(ctx, "toolu_x", "dropped by the CLI"); err != nil {
		t.Fatal(err)
	}
	c, take, err := s.TakeToolDecision(ctx, "toolu_x")
	if err != nil || c.Decision != DecisionDeny || c.Reason != "dropped by the CLI" || take != TakeFirst {
		t.Errorf("%+v %v %v", c, take, err)
	}
	if rec, _ := s.QuestionSet(ctx, set.ID); rec.State != SetExpired {
		t.Errorf("set %s", rec.State)
	}
	if err := s.DropToolCall(ctx, "toolu_x", "again"); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.ToolCall(ctx, "toolu_x"); c.Reason != "dropped by the CLI" {
		t.Errorf("a decided call changed: %+v", c)
	}
}
