package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/approvals"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// specRunAsking makes a run of spec in workdir whose first turn asks set
// (its ID and run ID are the run's) and returns the set as stored.
func specRunAsking(t *testing.T, s *Store, runID, spec, workdir string, set questions.Set) SetRecord {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CreateRun(ctx, Run{ID: runID, Spec: spec, WorkDir: workdir, Prompt: "do it", Surfaces: []string{"terminal"}}); err != nil {
		t.Fatal(err)
	}
	turn, err := s.BeginTurn(ctx, Turn{RunID: runID, Kind: TurnStart, Prompt: "do it", SessionID: "sess-" + runID})
	if err != nil {
		t.Fatal(err)
	}
	set.ID, set.RunID, set.Turn = runID+"-s1", runID, turn.Seq
	for i := range set.Questions {
		set.Questions[i].ID = runID + "q" + string(rune('a'+i))
	}
	if err := s.FinishTurn(ctx, runID, turn.Seq, TurnResult{Status: "success", SessionID: "sess-" + runID}, &set, []string{"terminal"}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.QuestionSet(ctx, set.ID)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func upgradeSet(text string) questions.Set {
	return questions.Set{Questions: []questions.Question{{Text: text, Options: []questions.Option{{Label: "Yes"}, {Label: "No"}}}}}
}

func offer(t *testing.T, s *Store, rec SetRecord, text, by string) {
	t.Helper()
	a, err := questions.ParseQuestionAnswer(rec.Set.Questions[0], text)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Offer(context.Background(), questions.Response{SetID: rec.Set.ID, Answers: []questions.Answer{a}, By: by, Surface: "cli"})
	if err != nil || !d.Taken {
		t.Fatalf("offer: %+v %v", d, err)
	}
}

// TestRulesAnswerSetsInScope: a remembered answer answers the same question
// (white space and case aside) in the next run of its spec at once, by the
// rule, and records the use; another spec's run, a revoked rule and an
// expired rule leave the question pending.
func TestRulesAnswerSetsInScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	first := specRunAsking(t, s, "r1", "nightly", "/w1", upgradeSet("Upgrade to pgx v5?"))
	offer(t, s, first, "1", "alice")

	if _, err := s.Remember(ctx, RuleRequest{SetID: first.Set.ID, Scope: ScopeSpec, Lifetime: 7 * 24 * time.Hour, By: "bob", Surface: "cli"}); err == nil {
		t.Error("bob kept alice's answer as a rule")
	}
	if _, err := s.Remember(ctx, RuleRequest{SetID: first.Set.ID, Scope: ScopeSpec, Lifetime: 40 * 24 * time.Hour, By: "alice", Surface: "cli"}); err == nil || !strings.Contains(err.Error(), "rules.max_lifetime") {
		t.Errorf("a rule beyond the longest lifetime: %v", err)
	}
	rule, err := s.Remember(ctx, RuleRequest{SetID: first.Set.ID, Scope: ScopeSpec, Lifetime: 7 * 24 * time.Hour, By: "alice", Surface: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	if rule.ScopeValue != "nightly" || rule.FromRun != "r1" || rule.ExpiresAt.Sub(rule.CreatedAt) != 7*24*time.Hour {
		t.Fatalf("rule = %+v", rule)
	}

	second := specRunAsking(t, s, "r2", "nightly", "/w2", upgradeSet("  upgrade TO pgx\n v5? "))
	if second.State != SetAnswered || second.Response.Surface != RuleSurface || !strings.HasPrefix(second.Response.By, "rule "+rule.ID+", made by alice on ") {
		t.Fatalf("the rule did not answer: %+v", second)
	}
	if got := second.Response.Answers[0].Labels; len(got) != 1 || got[0] != "Yes" {
		t.Errorf("answer = %+v", second.Response.Answers)
	}
	uses, err := s.RuleUses(ctx, rule.ID, "")
	if err != nil || len(uses) != 1 || uses[0].RunID != "r2" || uses[0].SetID != second.Set.ID {
		t.Fatalf("uses = %+v, %v", uses, err)
	}
	if r, err := s.RuleByID(ctx, rule.ID); err != nil || r.Uses != 1 {
		t.Errorf("rule = %+v, %v", r, err)
	}

	if other := specRunAsking(t, s, "r3", "weekly", "/w1", upgradeSet("Upgrade to pgx v5?")); other.State != SetPending {
		t.Errorf("another spec's run was answered: %+v", other)
	}
	if differs := specRunAsking(t, s, "r4", "nightly", "/w1", upgradeSet("Upgrade to pgx v6?")); differs.State != SetPending {
		t.Errorf("another question was answered: %+v", differs)
	}

	if _, err := s.RevokeRule(ctx, rule.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RevokeRule(ctx, rule.ID, "carol"); !errors.Is(err, ErrRuleRevoked) {
		t.Errorf("revoked twice: %v", err)
	}
	if after := specRunAsking(t, s, "r5", "nightly", "/w1", upgradeSet("Upgrade to pgx v5?")); after.State != SetPending {
		t.Errorf("a revoked rule answered: %+v", after)
	}
	if list, err := s.Rules(ctx, RuleFilter{}); err != nil || len(list) != 0 {
		t.Errorf("rules in force = %+v, %v", list, err)
	}
	if list, err := s.Rules(ctx, RuleFilter{All: true}); err != nil || len(list) != 1 || list[0].RevokedBy != "carol" {
		t.Errorf("all rules = %+v, %v", list, err)
	}

	// An expired rule answers nothing.
	offer(t, s, specRunAsking(t, s, "r6", "hourly", "/w1", upgradeSet("Deploy?")), "2", "alice")
	short, err := s.Remember(ctx, RuleRequest{SetID: "r6-s1", Scope: ScopeRepo, Lifetime: time.Hour, By: "alice", Surface: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	if inRepo := specRunAsking(t, s, "r7", "other", "/w1", upgradeSet("Deploy?")); inRepo.State != SetAnswered {
		t.Errorf("a repo rule did not answer in its repo: %+v", inRepo)
	}
	later := short.ExpiresAt.Add(time.Second)
	s.now = func() time.Time { return later }
	if expired := specRunAsking(t, s, "r8", "other", "/w1", upgradeSet("Deploy?")); expired.State != SetPending {
		t.Errorf("an expired rule answered: %+v", expired)
	}
}

// TestApprovalRulesNeverPastThePolicy: an approval kept as a rule with a
// pattern allows the calls the pattern allows in scope, at once; never one
// the run's policy denies, and never another command.
func TestApprovalRulesNeverPastThePolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	mk := func(runID string, policy *approvals.Policy) {
		if _, err := s.CreateRun(ctx, Run{ID: runID, Spec: "nightly", WorkDir: "/w", Prompt: "do it", Surfaces: []string{"terminal"}, Status: RunRunning}); err != nil {
			t.Fatal(err)
		}
		if policy != nil {
			if err := s.SetRunPolicy(ctx, runID, policy.Encode()); err != nil {
				t.Fatal(err)
			}
		}
	}
	ask := func(runID string, call questions.ToolCall) ToolCall {
		set := questions.ApprovalSet(runID, 1, call)
		c, _, err := s.AskTool(ctx, ToolCall{ToolUseID: call.ToolUseID, RunID: runID, Kind: questions.KindApproval, Tool: call.Tool, Input: call.Input}, set, []string{"terminal"}, true)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	mk("a1", nil)
	c := ask("a1", bashCall("toolu_1", "go test ./..."))
	answer(t, s, questions.ApprovalSet("a1", 1, bashCall("toolu_1", "go test ./...")), "Allow once")
	if _, err := s.Remember(ctx, RuleRequest{SetID: c.SetID, Scope: ScopeSpec, By: "alice", Surface: "cli", Pattern: "Bash(rm:*)"}); err == nil {
		t.Error("a pattern that does not allow the call was kept")
	}
	rule, err := s.Remember(ctx, RuleRequest{SetID: c.SetID, Scope: ScopeSpec, By: "alice", Surface: "cli", Pattern: "Bash(go test:*)"})
	if err != nil {
		t.Fatal(err)
	}
	if rule.ExpiresAt.Sub(rule.CreatedAt) != DefaultRuleMaxLifetime || rule.Summary != "Bash(go test:*)" {
		t.Errorf("rule = %+v", rule)
	}

	mk("a2", nil)
	if got := ask("a2", bashCall("toolu_2", "go test ./internal/...")); got.Decision != DecisionAllow || !strings.Contains(got.DecidedBy, "rule "+rule.ID) {
		t.Errorf("the rule did not allow the call: %+v", got)
	}
	if got, take, err := s.TakeToolDecision(ctx, "toolu_2"); err != nil || take != TakeFirst || got.Decision != DecisionAllow {
		t.Errorf("take = %+v %v %v", got, take, err)
	}
	if got := ask("a2", bashCall("toolu_3", "go test ./... && rm -rf /")); got.Decision != "" {
		t.Errorf("the rule allowed another command: %+v", got)
	}
	mk("a3", &approvals.Policy{Deny: []string{"Bash(go test:*)"}})
	if got := ask("a3", bashCall("toolu_4", "go test ./...")); got.Decision != "" {
		t.Errorf("the rule allowed a call the policy denies: %+v", got)
	}
	if uses, err := s.RuleUses(ctx, "", "a2"); err != nil || len(uses) != 1 {
		t.Errorf("uses of a2 = %+v, %v", uses, err)
	}
}

func TestParseRemember(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		scope string
		life  time.Duration
		bad   bool
	}{
		{in: "spec:7d", scope: ScopeSpec, life: 7 * 24 * time.Hour},
		{in: "repo:36h", scope: ScopeRepo, life: 36 * time.Hour},
		{in: "ALL", scope: ScopeAll},
		{in: "spec:0d", bad: true},
		{in: "spec:7x", bad: true},
		{in: "team:7d", bad: true},
		{in: "", bad: true},
		{in: "spec:-1h", bad: true},
	} {
		scope, life, err := ParseRemember(tc.in)
		if (err != nil) != tc.bad || scope != tc.scope || life != tc.life {
			t.Errorf("ParseRemember(%q) = %q, %s, %v", tc.in, scope, life, err)
		}
	}
}

// TestSuggestAfterTheSameAnswerKTimes: the same question answered the same
// way in the last K runs of a spec is asked the next time with a line that
// suggests keeping the answer as a rule; a different answer among them, or
// another spec, suggests nothing.
func TestSuggestAfterTheSameAnswerKTimes(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	s.SetRuleSuggestAfter(3)
	ask := func(runID, spec string) SetRecord {
		return specRunAsking(t, s, runID, spec, "/w", upgradeSet("Deploy now?"))
	}
	offer(t, s, ask("a1", "daily"), "1", "alice")
	offer(t, s, ask("a2", "daily"), "2", "alice")
	offer(t, s, ask("a3", "daily"), "1", "bob")
	if got := ask("a4", "daily"); strings.Contains(got.Set.Context, SuggestionPrefix) {
		t.Fatalf("suggested after two same answers and another: %q", got.Set.Context)
	} else {
		offer(t, s, got, "1", "alice")
	}
	if got := ask("a5", "daily"); strings.Contains(got.Set.Context, SuggestionPrefix) {
		t.Fatalf("suggested after two same answers in a row: %q", got.Set.Context)
	} else {
		offer(t, s, got, "1", "alice")
	}
	got := ask("a6", "daily")
	if !strings.Contains(got.Set.Context, SuggestionPrefix+`"Yes" the last 3 times in spec daily`) || !strings.Contains(got.Set.Context, "--remember spec:30d") {
		t.Fatalf("no suggestion after three same answers: %q", got.Set.Context)
	}
	if other := ask("b1", "weekly"); strings.Contains(other.Set.Context, SuggestionPrefix) {
		t.Errorf("another spec's run got the suggestion: %q", other.Set.Context)
	}
	s.SetRuleSuggestAfter(-1)
	if off := ask("a7", "daily"); strings.Contains(off.Set.Context, SuggestionPrefix) {
		t.Errorf("suggested with suggestions off: %q", off.Set.Context)
	}
}

// FuzzParseRemember: any value parses or is refused, never with a scope
// outside spec, repo and all or a lifetime of zero or less.
func FuzzParseRemember(f *testing.F) {
	for _, s := range []string{"spec:7d", "repo:36h", "all", "spec:0d", "x:1d", "spec:-1h", "spec:99999999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		scope, life, err := ParseRemember(s)
		if err != nil {
			return
		}
		if scope != ScopeSpec && scope != ScopeRepo && scope != ScopeAll || life < 0 {
			t.Fatalf("ParseRemember(%q) = %q, %s", s, scope, life)
		}
	})
}
